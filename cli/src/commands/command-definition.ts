import type { Command } from 'commander';

/**
 * Defines one `diffmesh` command on `cmd`: its description, arguments and flags, and the
 * action, which reports its exit status through `exit`. A definition module imports only
 * what parsing needs; the action loads the rest when it runs.
 */
export type CommandDefinition = (cmd: Command, exit: (code: number) => void) => void;
