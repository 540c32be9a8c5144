import fs from 'node:fs';
const t0 = performance.now();
const protoLoader = await import('@grpc/proto-loader');
const grpc = await import('@grpc/grpc-js');
const protobuf = (await import('protobufjs')).default;
const t1 = performance.now();
const p = await import('./dist/index.js');
const t2 = performance.now();
const mode = process.argv[2];
let def;
if (mode === 'proto') def = protoLoader.loadSync([...p.PROTO_FILES], p.LOADER_OPTIONS);
else if (mode === 'json') { const json = JSON.parse(fs.readFileSync('/tmp/dm.json','utf8')); def = protoLoader.fromJSON(json, p.LOADER_OPTIONS); }
else if (mode === 'binpb') def = protoLoader.loadFileDescriptorSetFromBuffer(p.readDescriptorSet(), p.LOADER_OPTIONS);
else if (mode === 'mkjson') { const r = p.newDiffmeshRoot({keepCase:false}); fs.writeFileSync('/tmp/dm.json', JSON.stringify(r.toJSON())); }
const t3 = performance.now();
if (def) grpc.loadPackageDefinition(def);
const t4 = performance.now();
console.log(mode, 'libs', (t1-t0).toFixed(0), 'protosidx', (t2-t1).toFixed(0), 'load', (t3-t2).toFixed(0), 'pkgdef', (t4-t3).toFixed(0), def ? Object.keys(def).length : '');
