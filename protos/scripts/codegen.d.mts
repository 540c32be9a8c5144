// Types of codegen.mjs, for the tests in src/.

/** The protos package directory. */
export declare const PKG_DIR: string;
/** Where the generated types are committed, relative to the package directory. */
export declare const GENERATED_DIR: string;
/** The compiled FileDescriptorSet, relative to the package directory. */
export declare const DESCRIPTOR_SET_FILE: string;
/** The message root in protobufjs's JSON form, relative to the package directory. */
export declare const MESSAGE_ROOT_FILE: string;
/** Options passed to proto-loader-gen-types. */
export declare const GEN_TYPES_ARGS: readonly string[];

export interface TreeDiff {
  /** Files only in the freshly generated tree. */
  missing: string[];
  /** Files only in the committed tree. */
  extra: string[];
  /** Files whose bytes differ. */
  changed: string[];
}

export interface CheckResult extends TreeDiff {
  ok: boolean;
}

export interface DescriptorCheckResult {
  ok: boolean;
  /** The committed file does not exist. */
  missing: boolean;
}

export declare function listProtoFiles(pkgDir?: string): string[];
export declare function generateInto(outDir: string, pkgDir?: string): void;
export declare function generate(pkgDir?: string): void;
export declare function diffTrees(expectedDir: string, actualDir: string): TreeDiff;
export declare function checkGenerated(opts?: { pkgDir?: string; generatedDir?: string }): CheckResult;
export declare function formatDrift(result: TreeDiff): string;
export declare function buildDescriptorSet(outFile: string, pkgDir?: string): void;
export declare function checkDescriptorSet(opts?: { pkgDir?: string; file?: string }): DescriptorCheckResult;
export declare function formatDescriptorDrift(result: DescriptorCheckResult, file?: string): string;
export declare function buildMessageRoot(outFile: string, pkgDir?: string): void;
export declare function checkMessageRoot(opts?: { pkgDir?: string; file?: string }): DescriptorCheckResult;
