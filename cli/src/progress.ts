import { createRequire } from 'node:module';
import type cliProgress from 'cli-progress';
import type { RequestEvent } from '@diffmesh/core/client';

/** cli-progress, loaded when a bar is drawn (a terminal), not with every remote command. */
function progressBars(): typeof cliProgress {
  return createRequire(import.meta.url)('cli-progress') as typeof cliProgress;
}

/** Shows a request's progress to a person. */
export interface Progress {
  update(e: RequestEvent): void;
  stop(): void;
}

/**
 * A progress bar on a terminal; one line per stage when stderr is not a terminal. A stage's
 * warnings (e.g. a prompt cut to the text encoder's length) are written as `warning: …` lines
 * even without progress: at once on lines, after the bar on a terminal.
 */
export function createProgress(stream: NodeJS.WriteStream, enabled: boolean): Progress {
  if (!enabled) return new WarningsOnly(stream);
  if (!stream.isTTY) return new LineProgress(stream);
  return new BarProgress(stream);
}

function warningLines(e: RequestEvent): string {
  return e.type === 'stage_finished' && e.warnings ? e.warnings.map((w) => `warning: ${w}\n`).join('') : '';
}

class WarningsOnly implements Progress {
  constructor(private readonly stream: NodeJS.WriteStream) {}

  update(e: RequestEvent): void {
    const lines = warningLines(e);
    if (lines) this.stream.write(lines);
  }

  stop(): void {}
}

class BarProgress implements Progress {
  private readonly bar: cliProgress.SingleBar;
  private started = false;
  private warnings = '';

  constructor(private readonly stream: NodeJS.WriteStream) {
    const bars = progressBars();
    this.bar = new bars.SingleBar(
      {
        stream,
        format: ' {stage} |{bar}| {value}/{total} {unit} | {duration_formatted}',
        hideCursor: true,
        clearOnComplete: false,
      },
      bars.Presets.shades_classic,
    );
  }

  update(e: RequestEvent): void {
    this.warnings += warningLines(e);
    if (e.type === 'stage_started') {
      const payload = { stage: e.stage.padEnd(13), unit: e.stage === 'denoising' ? 'steps' : '' };
      if (!this.started) {
        this.bar.start(1, 0, payload);
        this.started = true;
      } else {
        this.bar.setTotal(1);
        this.bar.update(0, payload);
      }
    } else if (e.type === 'progress' && this.started) {
      this.bar.setTotal(e.totalSteps);
      this.bar.update(e.step);
    }
  }

  stop(): void {
    if (this.started) this.bar.stop();
    if (this.warnings) this.stream.write(this.warnings);
    this.warnings = '';
  }
}

class LineProgress implements Progress {
  constructor(private readonly stream: NodeJS.WriteStream) {}

  update(e: RequestEvent): void {
    if (e.type === 'stage_finished') {
      this.stream.write(`${e.stage}: done in ${e.runMs} ms\n${warningLines(e)}`);
    } else if (e.type === 'progress' && e.stage === 'denoising') {
      const quarter = Math.max(1, Math.round(e.totalSteps / 4));
      if (e.step % quarter === 0 || e.step === e.totalSteps) {
        this.stream.write(`denoising: step ${e.step}/${e.totalSteps}\n`);
      }
    }
  }

  stop(): void {}
}
