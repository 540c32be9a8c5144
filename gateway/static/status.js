// The diffmesh status page. Plain JavaScript, no build step, no inline handlers (the page is
// served with a strict Content-Security-Policy). Every API call carries the API key from the
// key field (kept in sessionStorage); with authentication off no key is needed.
'use strict';

(() => {
  const POLL_MS = 2000;
  const KEY_STORAGE = 'diffmesh.apiKey';
  const FINISHED = new Set(['REQUEST_STATUS_COMPLETED', 'REQUEST_STATUS_FAILED', 'REQUEST_STATUS_CANCELLED']);

  const $ = (id) => document.getElementById(id);

  // ---- helpers ---------------------------------------------------------------------------

  /** Creates an element; `text` sets textContent (never HTML), `class` the class name. */
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = String(v);
      else e.setAttribute(k, String(v));
    }
    for (const c of children) if (c !== undefined && c !== null) e.append(c);
    return e;
  }

  /** `STAGE_NAME_TEXT_ENCODING` → `text encoding`. */
  function enumLabel(value, prefix) {
    if (!value) return '';
    return String(value).replace(prefix, '').toLowerCase().replace(/_/g, ' ');
  }

  /** RFC 3339 (nanosecond precision allowed) → ms since the epoch. */
  function parseTime(s) {
    if (!s) return undefined;
    const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$/.exec(s);
    if (!m) return Date.parse(s);
    return Date.parse(m[1] + m[3]) + (m[2] ? Number('0' + m[2]) * 1000 : 0);
  }

  function fmtMs(ms) {
    if (ms === undefined || !Number.isFinite(ms)) return '–';
    if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
    return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  }

  function fmtClock(ms) {
    if (ms === undefined) return '';
    return new Date(ms).toLocaleTimeString([], { hour12: false });
  }

  function apiKey() {
    return sessionStorage.getItem(KEY_STORAGE) || '';
  }

  function authHeaders(extra) {
    const h = Object.assign({}, extra || {});
    const key = apiKey();
    if (key) h.authorization = `Bearer ${key}`;
    return h;
  }

  /** An Error carrying the HTTP status and the message of a JSON error body (both styles). */
  async function httpError(res) {
    let message = res.statusText || 'request failed';
    let reason = '';
    try {
      const body = await res.json();
      if (body && body.error) {
        message = body.error.message || message;
        reason = body.error.reason || body.error.code || '';
      }
    } catch {
      // not JSON: keep the status text
    }
    const err = new Error(`${res.status}${reason ? ` ${reason}` : ''}: ${message}`);
    err.status = res.status;
    return err;
  }

  async function getJson(url) {
    const res = await fetch(url, { headers: authHeaders({ accept: 'application/json' }), cache: 'no-store' });
    if (!res.ok) throw await httpError(res);
    return res.json();
  }

  function showNotice(text) {
    const n = $('notice');
    n.textContent = text || '';
    n.hidden = !text;
  }

  // ---- API key -----------------------------------------------------------------------------

  let needKey = false;

  function setupKey() {
    $('api-key').value = apiKey();
    $('key-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const key = $('api-key').value.trim();
      if (key) sessionStorage.setItem(KEY_STORAGE, key);
      else sessionStorage.removeItem(KEY_STORAGE);
      needKey = false;
      showNotice('');
      loadModels();
      poll();
    });
    $('forget-key').addEventListener('click', () => {
      sessionStorage.removeItem(KEY_STORAGE);
      $('api-key').value = '';
      poll();
    });
  }

  function onAuthFailure(err) {
    if (err.status !== 401) return false;
    needKey = true;
    showNotice(apiKey() ? `The API key was refused (${err.message}). Enter a valid key above.` : 'This gateway needs an API key: enter it above.');
    $('api-key').focus();
    return true;
  }

  // ---- live previews ---------------------------------------------------------------------------
  //
  // A request that asks for previews gets `preview` events: a small PNG of its latent every few
  // steps. The page's own request gets them on its Generate stream; other running requests in
  // the list are followed with Watch (a few at a time) so their picture forms in the list too.

  const MAX_WATCHED = 4;
  /** reqId → { src, step, totalSteps, width, height, bytes } of the latest preview. */
  const previews = new Map();
  /** reqId → AbortController of the Watch stream following it. */
  const watched = new Map();
  /** The request the Generate form is running (its stream brings its previews). */
  let ownReqId = '';

  function previewOf(p) {
    const data = p.data || '';
    return {
      src: `data:${p.mediaType || 'image/png'};base64,${data}`,
      step: p.step || 0,
      totalSteps: p.totalSteps || 0,
      width: p.width || 0,
      height: p.height || 0,
      bytes: Math.floor((data.length * 3) / 4),
    };
  }

  /** Records a request's latest preview and shows it in its row of the list (if shown). */
  function notePreview(reqId, p) {
    const pv = previewOf(p);
    previews.set(reqId, pv);
    const row = document.querySelector(`.req[data-req-id="${CSS.escape(reqId)}"] .req-preview`);
    if (row) {
      row.src = pv.src;
      row.title = `preview at step ${pv.step}/${pv.totalSteps}`;
      row.hidden = false;
    }
    return pv;
  }

  /** Follows the running requests of the list that the page does not follow yet; forgets finished ones. */
  function followPreviews(requests) {
    const live = new Set(requests.filter((r) => !FINISHED.has(r.status)).map((r) => r.reqId));
    for (const [reqId, ctl] of watched) if (!live.has(reqId)) ctl.abort();
    for (const reqId of previews.keys()) if (!live.has(reqId) && reqId !== ownReqId) previews.delete(reqId);
    for (const reqId of live) {
      if (watched.size >= MAX_WATCHED) break;
      if (watched.has(reqId) || reqId === ownReqId) continue;
      const ctl = new AbortController();
      watched.set(reqId, ctl);
      watchPreviews(reqId, ctl.signal).finally(() => {
        if (watched.get(reqId) === ctl) watched.delete(reqId);
      });
    }
  }

  async function watchPreviews(reqId, signal) {
    try {
      const res = await fetch(`api/v1/requests/${encodeURIComponent(reqId)}:watch`, {
        headers: authHeaders({ accept: 'text/event-stream' }),
        signal,
      });
      if (!res.ok || !res.body) return;
      await readEvents(res.body, (name, data) => {
        if (name !== 'message') return;
        for (const ev of (JSON.parse(data) || {}).events || []) if (ev.preview) notePreview(reqId, ev.preview);
      });
    } catch {
      // stopped, or the request went away: the list shows what it knows
    }
  }

  // ---- status polling ------------------------------------------------------------------------

  let pollTimer;

  async function poll() {
    clearTimeout(pollTimer);
    try {
      const status = await getJson('api/v1/status');
      // An answer means the key (or none) is accepted: a 401 seen before it came from a
      // request sent before the key was entered, so the notice and the model list are redone.
      if (needKey) {
        needKey = false;
        loadModels();
      }
      showNotice('');
      render(status);
    } catch (err) {
      if (onAuthFailure(err)) return; // wait for a key
      showNotice(`Could not load the status: ${err.message}`);
    }
    pollTimer = setTimeout(poll, POLL_MS);
  }

  function render(status) {
    const sched = $('scheduler');
    sched.replaceChildren(
      'scheduler ',
      el('code', { text: status.schedulerId || '?' }),
      status.version ? ` v${status.version}` : '',
      ` · updated ${fmtClock(parseTime(status.time) || Date.now())}`,
    );
    $('in-flight').textContent = `${status.inFlight || 0} in flight`;
    renderPools(status.pools || []);
    renderRequests(status.recentRequests || [], parseTime(status.time) || Date.now());
    followPreviews(status.recentRequests || []);
  }

  const BREAKER = {
    BREAKER_STATE_CLOSED: ['closed', 'closed'],
    BREAKER_STATE_HALF_OPEN: ['half-open', 'half-open'],
    BREAKER_STATE_OPEN: ['open', 'open'],
  };

  function renderPools(pools) {
    const body = $('pools').tBodies[0];
    if (pools.length === 0) {
      body.replaceChildren(el('tr', {}, el('td', { colspan: 4, class: 'none', text: 'no pools yet: no stage instance has registered' })));
      return;
    }
    body.replaceChildren(
      ...pools.map((p) => {
        const instances = (p.instances || []).map((i) => {
          const [cls, label] = BREAKER[i.breaker] || ['none', 'in-process'];
          const cap = Math.max(1, i.capacity || 0);
          const meter = el('span');
          meter.style.width = `${Math.min(100, ((i.active || 0) / cap) * 100)}%`;
          return el(
            'div',
            {
              class: `instance${i.available ? '' : ' unavailable'}`,
              'data-instance': i.id,
              title: `${i.id}${i.address ? ` at ${i.address}` : ''}${i.available ? '' : ' (takes no work now)'}`,
            },
            el('span', { class: 'id', text: i.id }),
            el('span', { class: 'meta', text: i.version ? `v${i.version}` : '' }),
            el('span', { class: 'meta', text: i.nodeId || '', title: 'node' }),
            el('span', { class: 'load', title: 'active / capacity' }, el('span', { class: 'meter' }, meter), el('span', { class: 'txt', text: `${i.active || 0}/${i.capacity || 0}` })),
            el('span', { class: `breaker ${cls}`, text: label }),
          );
        });
        const queued = p.queued || 0;
        return el(
          'tr',
          { 'data-pool': p.pool },
          el('td', { class: 'pool', text: p.pool }),
          el('td', { class: 'stage', text: enumLabel(p.stage, 'STAGE_NAME_') }),
          el('td', { class: 'num' }, el('span', { class: `queued-badge${queued > 0 ? ' busy' : ''}`, text: queued })),
          el('td', {}, instances.length ? el('div', { class: 'instances' }, ...instances) : el('span', { class: 'none', text: 'no instances' })),
        );
      }),
    );
  }

  function renderRequests(requests, now) {
    const box = $('requests');
    if (requests.length === 0) {
      box.replaceChildren(el('div', { class: 'empty', text: 'no requests yet' }));
      return;
    }
    box.replaceChildren(...requests.map((r) => renderRequest(r, now)));
  }

  function renderRequest(r, now) {
    const t0 = parseTime(r.createdAt) || now;
    const finished = FINISHED.has(r.status);
    const end = finished ? parseTime(r.updatedAt) || now : now;
    const total = Math.max(1, end - t0);
    const pct = (t) => `${Math.min(100, Math.max(0, ((t - t0) / total) * 100))}%`;
    const width = (a, b) => `${Math.min(100, Math.max(0, ((b - a) / total) * 100))}%`;
    const status = enumLabel(r.status, 'REQUEST_STATUS_');
    const rows = (r.timings || [])
      .slice()
      .sort((a, b) => (a.stageIndex || 0) - (b.stageIndex || 0))
      .map((t) => {
        const queuedAt = parseTime(t.enqueuedAt) || t0;
        const startedAt = parseTime(t.startedAt);
        const finishedAt = parseTime(t.finishedAt);
        const track = el('div', { class: 'wf-track' });
        const queueEnd = startedAt !== undefined ? startedAt : end;
        const q = el('span', { class: 'bar queued', title: `queued ${fmtMs(queueEnd - queuedAt)}` });
        q.style.left = pct(queuedAt);
        q.style.width = width(queuedAt, queueEnd);
        track.append(q);
        if (startedAt !== undefined) {
          const runEnd = finishedAt !== undefined ? finishedAt : end;
          const live = finishedAt === undefined && !finished;
          const b = el('span', { class: `bar running${live ? ' live' : ''}`, title: `running ${fmtMs(runEnd - startedAt)}` });
          b.style.left = pct(startedAt);
          b.style.width = width(startedAt, runEnd);
          track.append(b);
        }
        const times = startedAt === undefined
          ? `queue ${fmtMs(end - queuedAt)}`
          : `queue ${fmtMs(startedAt - queuedAt)} · run ${fmtMs((finishedAt !== undefined ? finishedAt : end) - startedAt)}`;
        return el(
          'div',
          { class: 'wf-row', 'data-stage': enumLabel(t.stage, 'STAGE_NAME_') },
          el('div', { class: 'wf-label', title: t.instanceId ? `on ${t.instanceId}` : '' },
            enumLabel(t.stage, 'STAGE_NAME_'),
            ' ',
            el('span', { class: 'pool', text: t.pool || '' }),
            (t.attempt || 0) > 1 ? ` ×${t.attempt}` : ''),
          track,
          el('div', { class: 'wf-times', text: times }),
        );
      });
    const running = !finished && r.totalSteps ? ` · step ${r.step}/${r.totalSteps}` : '';
    return el(
      'div',
      { class: 'req', 'data-req-id': r.reqId, 'data-status': status },
      el('div', { class: 'req-head' },
        el('span', { class: `status ${status}`, text: status }),
        el('span', { class: 'model', text: r.model }),
        el('span', { class: 'id', text: r.reqId }),
        el('span', { class: 'when', text: fmtClock(t0) }),
        el('span', { class: 'total', text: `${fmtMs(end - t0)}${running}` })),
      el('div', { class: 'prompt', text: r.prompt || '', title: r.prompt || '' }),
      r.error && r.error.message ? el('div', { class: 'req-error', text: `${enumLabel(r.error.reason, 'ERROR_REASON_')}: ${r.error.message}` }) : null,
      el('div', { class: 'req-body' }, el('div', { class: 'waterfall' }, ...rows), requestPreview(r.reqId, finished)),
    );
  }

  /** The latest preview of a running request (hidden until one comes). */
  function requestPreview(reqId, finished) {
    const pv = finished ? undefined : previews.get(reqId);
    const img = el('img', { class: 'req-preview', alt: 'preview of the picture as it forms' });
    if (pv) {
      img.src = pv.src;
      img.title = `preview at step ${pv.step}/${pv.totalSteps}`;
    } else img.hidden = true;
    return img;
  }

  // ---- models --------------------------------------------------------------------------------

  async function loadModels() {
    const select = $('model');
    try {
      const list = await getJson('v1/models');
      const models = (list.data || []).filter((m) => !m.modalities || m.modalities.includes('text-to-image'));
      const previous = select.value;
      select.replaceChildren(...models.map((m) => el('option', { value: m.id, text: m.id })));
      if (models.some((m) => m.id === previous)) select.value = previous;
      if (models.length === 0) select.append(el('option', { value: '', text: 'no text-to-image model' }));
    } catch (err) {
      if (onAuthFailure(err)) return;
      showNotice(`Could not load the models: ${err.message}`);
    }
  }

  // ---- generate --------------------------------------------------------------------------------

  let running;
  let imageUrl;

  function setRunning(on) {
    $('generate').disabled = on;
    $('cancel').disabled = !on;
  }

  function showGenerateError(text) {
    const box = $('generate-error');
    box.textContent = text;
    box.hidden = !text;
  }

  /** Reads a server-sent event stream; calls onEvent(name, data) for each event. */
  async function readEvents(body, onEvent) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    const flush = (block) => {
      let name = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line === '' || line.startsWith(':')) continue;
        const i = line.indexOf(':');
        const field = i === -1 ? line : line.slice(0, i);
        const value = i === -1 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'event') name = value;
        else if (field === 'data') data.push(value);
      }
      if (data.length > 0 || name !== 'message') onEvent(name, data.join('\n'));
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      let cut;
      while ((cut = buffer.indexOf('\n\n')) !== -1) {
        flush(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
      }
    }
    if (buffer.trim()) flush(buffer);
  }

  function stageLine(stages) {
    const line = $('run-stage');
    line.replaceChildren(
      ...stages.flatMap((s, i) => [
        i > 0 ? ' → ' : '',
        el('span', { class: s.done ? 'done' : 'now', text: `${s.name}${s.done ? ' ✓' : ''}` }),
      ]),
    );
  }

  function setProgress(step, total) {
    const bar = $('progress');
    bar.max = Math.max(1, total);
    bar.value = Math.min(step, total);
    $('progress-text').textContent = `step ${step}/${total}`;
  }

  function base64Bytes(b64) {
    const bin = atob(b64);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  /** Shows the first frame of a pixels ref: inline bytes are drawn here, others fetched as PNG. */
  async function showImage(ref, signal) {
    const img = $('result-image');
    if (imageUrl) URL.revokeObjectURL(imageUrl);
    imageUrl = undefined;
    const shape = (ref.shape || []).map(Number);
    if (ref.inlineData) {
      const [, height, width] = shape;
      const rgb = base64Bytes(ref.inlineData);
      const canvas = document.createElement('canvas');
      canvas.width = width;
      canvas.height = height;
      const ctx = canvas.getContext('2d');
      const image = ctx.createImageData(width, height);
      for (let p = 0, q = 0; p < width * height * 3; p += 3, q += 4) {
        image.data[q] = rgb[p];
        image.data[q + 1] = rgb[p + 1];
        image.data[q + 2] = rgb[p + 2];
        image.data[q + 3] = 255;
      }
      ctx.putImageData(image, 0, 0);
      img.src = canvas.toDataURL('image/png');
    } else {
      const capability = ref.capability ? `?capability=${encodeURIComponent(ref.capability)}` : '';
      const res = await fetch(`v1/images/objects/${encodeURIComponent(ref.objectId)}.png${capability}`, { headers: authHeaders(), signal });
      if (!res.ok) throw await httpError(res);
      imageUrl = URL.createObjectURL(await res.blob());
      img.src = imageUrl;
    }
    await img.decode();
  }

  async function generate(e) {
    e.preventDefault();
    if (running) return;
    const prompt = $('prompt').value.trim();
    if (!prompt) return;
    const params = { prompt };
    const steps = $('steps').value.trim();
    if (steps) params.numInferenceSteps = Number(steps);
    const seed = $('seed').value.trim();
    if (seed) params.seed = seed; // a decimal string: seeds are 64-bit
    const every = Number($('preview-every').value.trim() || 0);
    if (every > 0) params.preview = { everySteps: every };
    const body = { model: $('model').value, params };
    const controller = new AbortController();
    running = controller;
    setRunning(true);
    showGenerateError('');
    $('result').hidden = true;
    $('live-preview').hidden = true;
    $('run').hidden = false;
    $('progress').value = 0;
    $('progress-text').textContent = '';
    const started = performance.now();
    const stages = [];
    let reqId = '';
    let result;
    let failure;
    stageLine([{ name: 'submitting…', done: false }]);
    try {
      const res = await fetch('api/v1/generate', {
        method: 'POST',
        headers: authHeaders({ 'content-type': 'application/json', accept: 'text/event-stream' }),
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!res.ok) throw await httpError(res);
      function onEvent(ev) {
        reqId = ev.reqId || reqId;
        ownReqId = reqId;
        if (ev.queued) {
          if (stages.length === 0) stageLine([{ name: `queued in ${ev.queued.pool}`, done: false }]);
        } else if (ev.stageStarted) {
          for (const s of stages) s.done = true;
          stages.push({ name: enumLabel(ev.stageStarted.stage, 'STAGE_NAME_'), done: false });
          stageLine(stages);
        } else if (ev.stepProgress) {
          if (ev.stepProgress.stage === 'STAGE_NAME_DENOISING') setProgress(ev.stepProgress.step || 0, ev.stepProgress.totalSteps || 0);
        } else if (ev.preview) {
          const pv = notePreview(reqId, ev.preview);
          $('preview-image').src = pv.src;
          $('preview-caption').textContent = `preview · step ${pv.step}/${pv.totalSteps} · ${pv.width}×${pv.height} · ${(pv.bytes / 1024).toFixed(1)} KiB`;
          $('live-preview').hidden = false;
        } else if (ev.stageFinished) {
          for (const s of stages) s.done = true;
          stageLine(stages);
        } else if (ev.completed) {
          const results = ev.completed.results || [];
          result = results.find((r) => r.name === 'pixels') || results[0];
        } else if (ev.failed) {
          const err = ev.failed.error || {};
          failure = `${enumLabel(err.reason, 'ERROR_REASON_') || 'failed'}: ${err.message || 'the request failed'}`;
        } else if (ev.cancelled) {
          failure = `cancelled${ev.cancelled.reason ? `: ${ev.cancelled.reason}` : ''}`;
        }
      }
      await readEvents(res.body, (name, data) => {
        if (name === 'end') return;
        if (name === 'error') {
          const err = JSON.parse(data).error || {};
          failure = `${err.code || ''} ${err.reason || err.status || ''}: ${err.message || 'the stream failed'}`.trim();
          return;
        }
        // One message may carry several events (those that happened together).
        for (const ev of (JSON.parse(data) || {}).events || []) onEvent(ev);
      });
      if (failure) throw new Error(failure);
      if (!result) throw new Error('the request ended without a result');
      await showImage(result, controller.signal);
      $('live-preview').hidden = true;
      const seconds = ((performance.now() - started) / 1000).toFixed(2);
      $('result-caption').textContent = `${body.model} · ${reqId} · ${seconds} s`;
      $('result').hidden = false;
    } catch (err) {
      showGenerateError(controller.signal.aborted ? 'cancelled' : err.message || String(err));
    } finally {
      previews.delete(reqId);
      ownReqId = '';
      running = undefined;
      setRunning(false);
      if (!needKey) poll();
    }
  }

  // ---- start -------------------------------------------------------------------------------

  setupKey();
  $('generate-form').addEventListener('submit', generate);
  $('cancel').addEventListener('click', () => running && running.abort());
  loadModels();
  poll();
})();
