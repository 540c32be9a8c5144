import { spawn } from 'node:child_process';
import { RemoteTensorStore, TensorServiceClient } from './runtime/dist/index.js';
const MiB=1024*1024, size=64*MiB;
const svc = spawn(process.execPath, ['tensor-svc/dist/main.js'], { env: { ...process.env, DIFFMESH_TENSOR_NODE_ID: 'g'+process.pid, DIFFMESH_TENSOR_LOG_LEVEL: 'warn', DIFFMESH_TENSOR_SPILL_DIR: '/tmp/exp/g-spill' }, stdio: ['ignore','pipe','inherit'] });
const address = await new Promise(r => { let o=''; svc.stdout.on('data', d => { o+=d; const m=/listening on (\S+)\n/.exec(o); if (m) r(m[1]); }); });
const t = new TensorServiceClient(address); const s = new RemoteTensorStore({ address, nodeId: 'other' });
const ref = await s.put({ requestId: 'r', name: 'x', data: Buffer.alloc(size, 1), shape: [size], dtype: 'uint8' });
const into = Buffer.allocUnsafe(size);
const R = { reused: [], fresh: [], store: [] };
const time = async (k, f) => { const t0 = performance.now(); await f(); R[k].push(size/1e6/((performance.now()-t0)/1000)); };
for (let i=0;i<8;i++) { await time('reused', () => t.get(ref.objectId, { into })); await time('fresh', () => t.get(ref.objectId)); await time('store', () => s.get(ref)); }
for (const [k, v] of Object.entries(R)) { v.shift(); console.log(k.padEnd(8), v.sort((a,b)=>a-b).map(x=>x.toFixed(0).padStart(5)).join(' ')); }
svc.kill(); t.close(); await s.close();
