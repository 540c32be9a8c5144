// The gateway's status page, end to end in a real browser: a mesh of processes with the
// gateway (API key on), Debian's Chromium driven headless by playwright-core (which never
// downloads a browser; integration-tests/scripts/ensure-chromium.sh installs one).
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodePng } from '@diffmesh/media';
import { startTestMesh, type TestMesh } from './harness.js';

const CHROMIUM = '/usr/bin/chromium';
const KEY = 'status-page-test-key';
const PROMPT = 'a red circle on a blue background';
const STEPS = 20;
/** A seed whose picture is clearly a red circle on blue (the model is tiny). */
const SEED = 9;
/** Where the screenshot is kept for a human to look at. */
const SCREENSHOT = path.join(tmpdir(), 'diffmesh-status-page.png');

/** Shares of red and of blue pixels in a region of an RGB image. */
function colourShares(
  png: { width: number; height: number; rgb: Uint8Array },
  box: { x: number; y: number; width: number; height: number },
) {
  let red = 0;
  let blue = 0;
  let total = 0;
  for (let y = Math.ceil(box.y); y < Math.floor(box.y + box.height); y++) {
    for (let x = Math.ceil(box.x); x < Math.floor(box.x + box.width); x++) {
      const i = (y * png.width + x) * 3;
      const [r, g, b] = [png.rgb[i], png.rgb[i + 1], png.rgb[i + 2]];
      total += 1;
      if (r > 140 && r > g * 1.6 && r > b * 1.6) red += 1;
      else if (b > 140 && b > r * 1.6 && b > g * 1.3) blue += 1;
    }
  }
  return { red: red / total, blue: blue / total, total };
}

describe('gateway status page', () => {
  let t: TestMesh;
  let gateway: string;
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`${CHROMIUM} not found: run integration-tests/scripts/ensure-chromium.sh (Debian package "chromium")`);
    }
    t = await startTestMesh({ gateway: { apiKeys: [KEY] } });
    gateway = t.mesh.gatewayUrl!;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--no-first-run',
        '--disable-sync',
      ],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 }, deviceScaleFactor: 1 });
    // Script errors and CSP violations fail the test (refused API calls are expected, and shown in the page).
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    page.on('console', (msg) => {
      if (msg.type() === 'error' && /Content Security Policy|Uncaught/i.test(msg.text())) problems.push(`console: ${msg.text()}`);
    });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it('is served without a key and with a strict CSP; its API needs the key', async () => {
    const html = await fetch(`${gateway}/status`);
    expect(html.status).toBe(200);
    expect(html.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = html.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    const text = await html.text();
    expect(text).not.toMatch(/\son[a-z]+=/i); // no inline event handlers
    expect(text).not.toMatch(/<script>(?!<\/script>)/); // no inline script
    for (const asset of ['status/status.js', 'status/status.css']) expect((await fetch(`${gateway}/${asset}`)).status).toBe(200);
    expect((await fetch(`${gateway}/status/`, { redirect: 'manual' })).headers.get('location')).toBe('../status');

    expect((await fetch(`${gateway}/api/v1/status`)).status).toBe(401);
    const res = await fetch(`${gateway}/api/v1/status`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(res.status).toBe(200);
    const status = (await res.json()) as {
      schedulerId: string;
      pools: Array<{ pool: string; stage: string; instances: Array<{ breaker: string; version: string }> }>;
    };
    expect(status.schedulerId).toMatch(/^scheduler-/);
    const dit = status.pools.find((p) => p.pool === 'dit-tiny');
    expect(dit).toMatchObject({ stage: 'STAGE_NAME_DENOISING', instances: [{ breaker: 'BREAKER_STATE_CLOSED' }] });
    expect(dit!.instances[0].version).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('shows pools and instances, generates an image with live progress, and lists the request with its waterfall', async () => {
    await page.goto(`${gateway}/status`);
    // Auth is on and no key is stored yet: the page says so.
    await page.locator('#notice', { hasText: 'needs an API key' }).waitFor();
    await page.fill('#api-key', KEY);
    await page.click('#key-form button[type=submit]');

    // Pools with their instances: version, node, load and a closed breaker each.
    for (const pool of ['encoder-tiny', 'dit-tiny', 'vae-tiny']) {
      const row = page.locator(`#pools tr[data-pool="${pool}"]`);
      await row.waitFor();
      await expect.poll(() => row.locator('.breaker').allTextContents()).toEqual(['closed']);
      const cells = await row.locator('.instance span').allTextContents();
      expect(cells.join(' ')).toMatch(/v\d+\.\d+\.\d+/);
      expect(cells).toContain(t.mesh.nodeId); // the node id of the test mesh
      expect(await row.locator('.load .txt').textContent()).toMatch(/^0\/\d+$/);
    }
    await expect.poll(() => page.locator('#notice').isHidden()).toBe(true);

    // Generate with live step progress.
    await page.locator('#model option[value="diffmesh/tiny-shapes"]').waitFor({ state: 'attached' });
    await page.selectOption('#model', 'diffmesh/tiny-shapes');
    await page.fill('#prompt', PROMPT);
    await page.fill('#steps', String(STEPS));
    await page.fill('#seed', String(SEED));
    // Record every value the progress text takes.
    await page.evaluate(`(() => {
      window.__progress = [];
      const node = document.getElementById('progress-text');
      // One record per change, even when several events arrive in one chunk.
      new MutationObserver((records) => {
        for (const r of records) for (const n of r.addedNodes) window.__progress.push(n.textContent);
      }).observe(node, { childList: true });
    })()`);
    await page.click('#generate');
    await page.locator('#progress-text', { hasText: `step ${STEPS}/${STEPS}` }).waitFor({ timeout: 60_000 });
    const image = page.locator('#result-image');
    // (Polled from here: the page's CSP forbids the string evaluation waitForFunction would use.)
    await expect
      .poll(
        () =>
          image.evaluate((img: { complete: boolean; naturalWidth: number; naturalHeight: number }) =>
            img.complete ? [img.naturalWidth, img.naturalHeight] : [],
          ),
        {
          timeout: 60_000,
        },
      )
      .toEqual([256, 256]);
    await page.locator('#result').waitFor();
    expect(await page.locator('#generate-error').isHidden()).toBe(true);
    const bar = await page.locator('#progress').evaluate((p: { value: number; max: number }) => [p.value, p.max]);
    expect(bar).toEqual([STEPS, STEPS]);
    const seen = await page.evaluate<string[]>('window.__progress');
    expect(seen.at(-1)).toBe(`step ${STEPS}/${STEPS}`);
    const steps = seen.map((s) => Number(/^step (\d+)\//.exec(s)?.[1]));
    expect(steps.length).toBeGreaterThan(1); // live: several steps, not only the end
    expect(steps).toEqual([...steps].sort((a, b) => a - b));

    // The request shows up in the recent requests, completed, with one waterfall row per stage.
    const req = page.locator('.req[data-status="completed"]', { hasText: PROMPT });
    await req.waitFor({ timeout: 10_000 });
    const caption = await page.locator('#result-caption').textContent();
    const reqId = await req.getAttribute('data-req-id');
    expect(caption).toContain(reqId!);
    expect(
      await req
        .locator('.wf-row')
        .evaluateAll((rows: Array<{ getAttribute(n: string): string | null }>) => rows.map((r) => r.getAttribute('data-stage'))),
    ).toEqual(['text encoding', 'denoising', 'vae decoding']);
    const widths = await req
      .locator('.wf-track .bar.running')
      .evaluateAll((bars: Array<{ getBoundingClientRect(): { width: number } }>) => bars.map((b) => b.getBoundingClientRect().width));
    expect(widths).toHaveLength(3);
    for (const w of widths) expect(w).toBeGreaterThan(0);
    // Scaled to the request's total: the bars fit in the track, and denoising takes the most room.
    expect(widths[1]).toBeGreaterThan(widths[0]);

    // A screenshot, and the image in it is mostly red and blue.
    await page.waitForTimeout(300); // let the last poll paint
    const shot = await page.screenshot({ fullPage: true });
    await writeFile(SCREENSHOT, shot);
    const box = await image.boundingBox();
    expect(box).not.toBeNull();
    const inner = { x: box!.x + 2, y: box!.y + 2, width: box!.width - 4, height: box!.height - 4 };
    const shares = colourShares(decodePng(shot), inner);
    expect(shares.total).toBeGreaterThan(200 * 200);
    expect(shares.red + shares.blue, `red ${shares.red}, blue ${shares.blue} (screenshot ${SCREENSHOT})`).toBeGreaterThan(0.8);
    expect(shares.red).toBeGreaterThan(0.05);
    expect(shares.blue).toBeGreaterThan(0.2);
    expect(problems).toEqual([]);
  }, 120_000);

  it('shows the picture forming while a request runs: live previews in the Generate card and in the request list', async () => {
    if (!page.url().endsWith('/status')) await page.goto(`${gateway}/status`);
    await page.fill('#api-key', KEY);
    await page.click('#key-form button[type=submit]');
    await page.locator('#model option[value="diffmesh/tiny-shapes"]').waitFor({ state: 'attached' });
    await page.selectOption('#model', 'diffmesh/tiny-shapes');
    // The Generate card: previews every 2 steps; record every picture the preview shows.
    await page.fill('#prompt', PROMPT);
    await page.fill('#steps', String(STEPS));
    await page.fill('#seed', String(SEED));
    await page.fill('#preview-every', '2');
    await page.evaluate(`(() => {
      window.__previews = [];
      const img = document.getElementById('preview-image');
      // One record per picture shown (several may come in one task): its previous src, and
      // whether the result was shown yet.
      new MutationObserver((records) => {
        const resultShown = !document.getElementById('result').hidden;
        for (const r of records) window.__previews.push({ old: r.oldValue, resultShown });
      }).observe(img, { attributes: true, attributeFilter: ['src'], attributeOldValue: true });
    })()`);
    await page.click('#generate');
    await page.locator('#result').waitFor({ timeout: 60_000 });
    const seen = await page.evaluate<Array<{ old: string | null; resultShown: boolean }>>('window.__previews');
    // Steps 2, 4, …, 20: ten pictures, each a PNG shown before the result.
    expect(seen).toHaveLength(STEPS / 2);
    const srcs = [...seen.slice(1).map((p) => p.old ?? ''), (await page.locator('#preview-image').getAttribute('src')) ?? ''];
    for (const src of srcs) expect(src).toMatch(/^data:image\/png;base64,/);
    for (const p of seen) expect(p.resultShown).toBe(false);
    expect(new Set(srcs).size).toBeGreaterThan(1); // the picture changes as it forms
    expect(await page.locator('#preview-caption').textContent()).toMatch(/^preview · step 20\/20 · 32×32 · /);
    // The result replaces the preview.
    expect(await page.locator('#live-preview').isHidden()).toBe(true);

    // The request list: a long request submitted elsewhere (the API) shows its latest preview
    // in its row while it runs.
    const res = await fetch(`${gateway}/api/v1/requests`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'diffmesh/tiny-shapes',
        params: {
          prompt: 'a yellow square moving right',
          width: 512,
          height: 512,
          numFrames: 32,
          numInferenceSteps: 200,
          preview: { everySteps: 1 },
        },
      }),
    });
    const { reqId } = (await res.json()) as { reqId: string };
    try {
      const thumb = page.locator(`.req[data-req-id="${reqId}"] .req-preview`);
      await thumb.waitFor({ state: 'visible', timeout: 30_000 });
      expect(await thumb.getAttribute('src')).toMatch(/^data:image\/png;base64,/);
      expect(await page.locator(`.req[data-req-id="${reqId}"]`).getAttribute('data-status')).toMatch(/running|pending/);
      const size = await thumb.evaluate((img: { naturalWidth: number; naturalHeight: number }) => [img.naturalWidth, img.naturalHeight]);
      expect(size).toEqual([64, 64]); // 512 px at 1/8
      // For a human to look at: the running request with its picture forming.
      await writeFile(path.join(tmpdir(), 'diffmesh-status-page-previews.png'), await page.screenshot({ fullPage: true }));
    } finally {
      await fetch(`${gateway}/api/v1/requests/${reqId}:cancel`, { method: 'POST', headers: { authorization: `Bearer ${KEY}` } });
    }
    expect(problems).toEqual([]);
  }, 120_000);

  it('shows a refused request as its error', async () => {
    await page.fill('#steps', '500'); // the plans allow 1–200; the scheduler says so
    await page.click('#generate');
    const error = page.locator('#generate-error');
    await error.waitFor();
    expect(await error.textContent()).toMatch(/^400 INVALID_PARAMETER: .*(num_inference_steps|numInferenceSteps).*200/);
    expect(problems).toEqual([]);
  });
});
