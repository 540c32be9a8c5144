// Dependency rules of the diffmesh workspaces (run by `npm run lint:deps`, part of `npm test`).
// Arrows run one way: protos ← core ← libraries ← services ← cli / integration-tests / bench.
// Paths are the workspace folders; another package is reached through its built entry point
// (`<pkg>/dist/…`), so the rules also see what a process really loads at run time.
const SERVICES = '(scheduler|tensor-svc|encoder-svc|dit-svc|vae-svc|gateway)';
const LIBRARIES = '(core|discovery|tensor-client|media|model-layout|adapters|stage-host|client|testing|models)';
const TOP = '(cli|integration-tests|bench|deploy)';
const TEST = '\\.test\\.ts$|/fixtures/';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-cycle',
      severity: 'error',
      comment: 'Modules and packages form no cycle.',
      from: { pathNot: TEST },
      to: { circular: true },
    },
    {
      name: 'protos-is-the-bottom',
      severity: 'error',
      comment: 'The wire contracts depend on no diffmesh package.',
      from: { path: '^protos/' },
      to: { path: `^(${LIBRARIES.slice(1, -1)}|${SERVICES.slice(1, -1)}|${TOP.slice(1, -1)})/` },
    },
    {
      name: 'core-depends-only-on-protos',
      severity: 'error',
      comment: 'core holds what every process shares; it depends on protos and npm packages only.',
      from: { path: '^core/' },
      to: {
        path: `^(discovery|tensor-client|media|model-layout|adapters|stage-host|client|testing|models|${SERVICES.slice(1, -1)}|${TOP.slice(1, -1)})/`,
      },
    },
    {
      name: 'core-has-no-onnx-nats-or-media',
      severity: 'error',
      comment: 'No ONNX, no NATS and no image codecs in core: every process loads it.',
      from: { path: '^core/' },
      to: { path: 'node_modules/(onnxruntime-node|nats|pngjs|gifenc|sharp)/' },
    },
    {
      name: 'library-imports-service',
      severity: 'error',
      comment: 'Libraries never import a service, the CLI or the tests.',
      from: { path: `^${LIBRARIES}/`, pathNot: TEST },
      to: { path: `^(${SERVICES.slice(1, -1)}|${TOP.slice(1, -1)})/` },
    },
    {
      name: 'service-imports-service',
      severity: 'error',
      comment: 'A service never imports another service; they talk over gRPC.',
      from: { path: `^${SERVICES}/` },
      to: { path: `^${SERVICES}/`, pathNot: '^$1/' },
    },
    {
      name: 'only-the-top-imports-the-top',
      severity: 'error',
      comment: 'The CLI is used by integration tests and benchmarks only; tests and benchmarks by nobody.',
      from: { path: `^(${LIBRARIES.slice(1, -1)}|${SERVICES.slice(1, -1)}|protos)/` },
      to: { path: `^${TOP}/` },
    },
    {
      name: 'no-deep-imports',
      severity: 'error',
      comment: 'Another package is used through its public surface (its index), never through its src/.',
      from: { path: '^([^/]+)/' },
      to: { path: '^[^/]+/src/', pathNot: '^$1/' },
    },
    {
      name: 'no-onnx-in-light-processes',
      severity: 'error',
      comment: 'Only stage services (and model builders) load onnxruntime-node; the gateway, scheduler, tensor-svc and client never do.',
      from: { path: '^(gateway|scheduler|tensor-svc|client|core|discovery|tensor-client|media|model-layout|adapters)/src/', pathNot: TEST },
      to: { path: 'node_modules/onnxruntime-node/', reachable: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Workspace sources and built entry points, plus the npm packages the rules name.
    includeOnly: `^((protos|${LIBRARIES.slice(1, -1)}|${SERVICES.slice(1, -1)}|${TOP.slice(1, -1)}|deploy/(operator|check))/(src|dist|bin|scripts)/|node_modules/(onnxruntime-node|nats|pngjs|gifenc|sharp)/)`,
    exclude: { path: '/generated/|\\.d\\.m?ts$|/dist/.*\\.test\\.js$' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.base.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'default'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
