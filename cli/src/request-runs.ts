import { createLogger, type LogLevel } from '@diffmesh/core/client';
import type { SubmitFlags, WatchFlags } from './commands/shared-options.js';
import { EXIT } from './exit-codes.js';
import { parseInteger, parseParams, reportError, statusName } from './flag-values.js';
import { parseDeadline } from './deadline.js';
import { readInputImage } from './input-image.js';
import { modelArgument } from './model-argument.js';
import { createProgress } from './progress.js';
import { connectScheduler } from './remote.js';
import { cancelRemote, parseReqId, submitRemote, watchRemote } from './requests.js';
import { schedulerTarget } from './scheduler-target.js';

export async function runSubmit(prompt: string, flags: SubmitFlags): Promise<number> {
  try {
    const log = createLogger({ name: 'diffmesh', level: 'warn' });
    const params = parseParams(flags);
    const priority = parseInteger(flags.priority, 'priority', -1_000_000, 1_000_000);
    const timeoutMs = flags.timeoutMs === undefined ? 0 : parseInteger(flags.timeoutMs, 'timeout_ms', 1, 2 ** 31 - 1);
    const image = flags.image !== undefined ? await readInputImage(flags.image) : undefined;
    const target = await schedulerTarget(flags.remote);
    const answer = await submitRemote(
      target.addresses,
      {
        model: (await modelArgument(flags.model)).id,
        prompt,
        params,
        priority,
        timeoutMs,
        ...(flags.deadline !== undefined ? { deadline: parseDeadline(flags.deadline) } : {}),
        requestId: flags.requestId ?? '',
        ...(image ? { image } : {}),
      },
      log,
      target.tls,
    );
    if (flags.json)
      process.stdout.write(`${JSON.stringify({ reqId: answer.reqId, status: statusName(answer.status), existing: answer.existing })}\n`);
    else process.stdout.write(`${answer.reqId}\n`);
    return EXIT.ok;
  } catch (err) {
    return reportError(err, false);
  }
}

export async function runWatch(reqId: string, flags: WatchFlags): Promise<number> {
  const log = createLogger({ name: 'diffmesh', level: flags.logLevel as LogLevel });
  const controller = new AbortController();
  const onSigint = (): void => controller.abort();
  process.once('SIGINT', onSigint);
  try {
    const target = await schedulerTarget(flags.remote);
    const outcome = await watchRemote(
      target.addresses,
      {
        reqId: parseReqId(reqId),
        output: flags.output,
        fps: flags.fps === undefined ? undefined : parseInteger(flags.fps, 'fps', 1, 240),
        ffmpegPath: flags.ffmpeg,
      },
      createProgress(process.stderr, flags.progress && !flags.json),
      controller.signal,
      log,
      target.tls,
    );
    if (flags.json) process.stdout.write(`${JSON.stringify({ ...outcome, status: 'completed' })}\n`);
    else if (outcome.file) {
      if (outcome.file.note) process.stderr.write(`note: ${outcome.file.note}\n`);
      process.stdout.write(
        `completed; wrote ${outcome.file.path} (${outcome.file.width}×${outcome.file.height}, ${outcome.file.frames > 1 ? `${outcome.file.frames} frames, ` : ''}${outcome.file.format})\n`,
      );
    } else process.stdout.write('completed\n');
    return EXIT.ok;
  } catch (err) {
    if (controller.signal.aborted) {
      process.stderr.write('diffmesh: stopped watching; the request goes on\n');
      return EXIT.interrupted;
    }
    return reportError(err, false);
  } finally {
    process.off('SIGINT', onSigint);
  }
}

export async function runCancel(reqId: string, flags: { remote: string; reason: string }): Promise<number> {
  try {
    const log = createLogger({ name: 'diffmesh', level: 'warn' });
    const target = await schedulerTarget(flags.remote);
    const { status } = await cancelRemote(target.addresses, parseReqId(reqId), flags.reason, log, target.tls);
    const name = statusName(status);
    process.stdout.write(
      name === 'cancelled' ? 'cancelled\n' : `not cancelled: the request had already ${name === 'completed' ? 'completed' : 'failed'}\n`,
    );
    return EXIT.ok;
  } catch (err) {
    return reportError(err, false);
  }
}

export async function runModels(flags: { remote: string; json?: boolean }): Promise<number> {
  let client: ReturnType<typeof connectScheduler> | undefined;
  try {
    const target = await schedulerTarget(flags.remote);
    client = connectScheduler(target.addresses, createLogger({ name: 'diffmesh', level: 'warn' }), target.tls);
    const { models } = await client.listModels({ timeoutMs: 10_000 });
    const rows = models.map((m) => ({
      model: m.name,
      pattern: m.pattern,
      modalities: m.modalities.map((x) => x.replace('MODALITY_', '').toLowerCase().replace(/_/g, '-')),
      ready: m.ready,
      unavailablePools: m.unavailablePools,
    }));
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(rows)}\n`);
      return EXIT.ok;
    }
    const width = Math.max(5, ...rows.map((r) => r.model.length));
    process.stdout.write(`${'MODEL'.padEnd(width)}  STATUS      MODALITIES\n`);
    for (const r of rows) {
      const status = r.ready ? 'ready' : 'registered';
      const why = r.ready ? '' : `  (no instance in ${r.unavailablePools.join(', ')})`;
      process.stdout.write(
        `${(r.model + (r.pattern ? ' (pattern)' : '')).padEnd(width)}  ${status.padEnd(10)}  ${r.modalities.join(', ')}${why}\n`,
      );
    }
    return EXIT.ok;
  } catch (err) {
    return reportError(err, false);
  } finally {
    await client?.close();
  }
}
