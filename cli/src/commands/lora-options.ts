import { homedir } from 'node:os';
import path from 'node:path';

/** `$DIFFMESH_LORA_DIR`, else `~/.diffmesh/loras`: the folder `--lora` names adapters in. */
export function defaultLoraDir(): string {
  return process.env.DIFFMESH_LORA_DIR ?? path.join(homedir(), '.diffmesh', 'loras');
}

/** Commander's collector of a repeatable `--lora NAME[:SCALE]`. */
export function collectLora(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}
