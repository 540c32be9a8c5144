import { Code, DiffmeshError, invalidParameter, type TlsFiles } from '@diffmesh/core/client';
import { clientTls, readState } from './mesh/state.js';

/**
 * `--remote`: one or more scheduler addresses (`host:port[,host:port…]`; any of them serves
 * any request), or `local` for the schedulers of the mesh `diffmesh up` started here; with
 * the TLS files to call them with (see {@link clientTls}): the local mesh's client
 * certificate, found through its state file.
 */
export async function schedulerTarget(remote: string): Promise<{ addresses: string[]; tls?: TlsFiles }> {
  const state = await readState();
  const withTls = (addresses: string[]): { addresses: string[]; tls?: TlsFiles } => {
    const tls = clientTls(addresses, state);
    return { addresses, ...(tls ? { tls } : {}) };
  };
  if (remote !== 'local') {
    const list = remote
      .split(',')
      .map((a) => a.trim())
      .filter((a) => a !== '');
    if (list.length === 0) throw invalidParameter('remote', 'expected host:port[,host:port…] or local');
    return withTls(list);
  }
  if (!state) {
    throw new DiffmeshError(
      Code.UNAVAILABLE,
      'TRANSPORT',
      'no running mesh found on this machine; start one with `diffmesh up`, or give --remote host:port',
    );
  }
  return withTls(state.schedulerAddresses?.length ? state.schedulerAddresses : [state.schedulerAddress]);
}
