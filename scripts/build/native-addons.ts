/**
 * Bun build plugin that makes lmdb's native addon (and msgpackr-extract's)
 * embeddable by `bun build --compile`.
 *
 * Why: lmdb and msgpackr-extract locate their `.node` file at run time through
 * `node-gyp-build-optional-packages` (`loadNAPI(dir)`), which scans the
 * package directory and the optional `@lmdb/lmdb-<os>-<arch>` package on disk.
 * Bun's compiler only embeds a `.node` file that is `require()`d by a literal
 * path, so a compiled binary would look for node_modules at run time and fail.
 * This plugin rewrites those loaders at bundle time into
 * `require("/abs/path/node.napi.<libc>.node")` for the build target, so the
 * addon is embedded and extracted/dlopen'ed by the binary itself. It also
 * starts lmdb's read buffer small, as every `bun` run here does
 * (lmdb-read-buffer.ts).
 */
import type { BunPlugin } from "bun";
import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { loadWithSmallReadBuffer, shrinkLmdbReadBuffer } from "./lmdb-read-buffer.ts";

export interface NativeTarget {
  /** Node-style platform: "linux" | "darwin" | "win32". */
  readonly platform: string;
  /** Node-style arch: "x64" | "arm64". */
  readonly arch: string;
  /** Linux only; undefined elsewhere. */
  readonly libc: "glibc" | "musl" | undefined;
  /** True when building for the machine running the build. */
  readonly isHost: boolean;
}

function hostLibc(): "glibc" | "musl" | undefined {
  if (process.platform !== "linux") return undefined;
  // musl systems ship their dynamic loader as /lib/ld-musl-<arch>.so.1.
  const lib = existsSync("/lib") ? readdirSync("/lib") : [];
  return lib.some((f) => f.startsWith("ld-musl-")) ? "musl" : "glibc";
}

/** Parses a Bun compile target such as "bun-linux-arm64-musl"; undefined = host. */
export function parseTarget(target: string | undefined): NativeTarget {
  const host: NativeTarget = {
    platform: process.platform,
    arch: process.arch,
    libc: hostLibc(),
    isHost: true,
  };
  if (target === undefined) return host;
  const m = /^bun-(linux|darwin|windows)-(x64|arm64)((?:-(?:baseline|modern|musl))*)$/.exec(target);
  if (!m) throw new Error(`unsupported --target "${target}" (expected e.g. bun-linux-x64, bun-linux-arm64-musl)`);
  const platform = m[1] === "windows" ? "win32" : m[1]!;
  const arch = m[2]!;
  const libc = platform === "linux" ? (m[3]!.includes("-musl") ? "musl" : "glibc") : undefined;
  const isHost = platform === host.platform && arch === host.arch && libc === host.libc;
  return { platform, arch, libc, isHost };
}

/** Finds `<dir>/node_modules/<name>` walking up from `fromDir`, like Node resolution. */
function findPackageDir(fromDir: string, name: string): string | undefined {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return candidate;
    if (dirname(dir) === dir) return undefined;
  }
}

/**
 * Picks the N-API prebuild for `target` in a prebuild package directory, using
 * the same tags node-gyp-build-optional-packages uses under Bun (it forces
 * abi=unsupported there, so only `*.napi*.node` files qualify).
 */
function pickNapiFile(dir: string, target: NativeTarget): string | undefined {
  const armv = target.arch === "arm64" ? "8" : undefined;
  let best: { file: string; score: number } | undefined;
  for (const file of readdirSync(dir)) {
    const tags = file.split(".");
    if (tags.pop() !== "node" || !tags.includes("napi")) continue;
    const libc = tags.find((t) => t === "glibc" || t === "musl");
    if (libc !== undefined && libc !== target.libc) continue;
    const armTag = tags.find((t) => t.startsWith("armv"));
    if (armTag !== undefined && armTag.slice(4) !== armv) continue;
    const score = (libc ? 1 : 0) + (armTag ? 1 : 0);
    if (!best || score > best.score) best = { file, score };
  }
  return best && join(dir, best.file);
}

/**
 * Absolute path of the addon for `pkgDir` (the lmdb or msgpackr-extract
 * package root), or undefined if its platform package is not installed.
 */
export function resolveAddon(pkgDir: string, platformPackage: string, target: NativeTarget): string | undefined {
  if (target.isHost) {
    // Mirrors node-gyp-build: a locally compiled addon wins on the host.
    const release = join(pkgDir, "build", "Release");
    const built = existsSync(release) ? readdirSync(release).find((f) => f.endsWith(".node")) : undefined;
    if (built) return join(release, built);
  }
  const dir = findPackageDir(pkgDir, platformPackage);
  return dir && pickNapiFile(dir, target);
}

export const lmdbPlatformPackage = (t: NativeTarget): string => `@lmdb/lmdb-${t.platform}-${t.arch}`;
const extractPlatformPackage = (t: NativeTarget): string =>
  `@msgpackr-extract/msgpackr-extract-${t.platform}-${t.arch}`;

/** Addons actually embedded, filled in as the bundler loads the loaders. */
export type EmbeddedAddons = Map<string, string>;

export function nativeAddonsPlugin(target: NativeTarget, embedded: EmbeddedAddons): BunPlugin {
  return {
    name: "tokenmint-native-addons",
    setup(build) {
      // lmdb: ESM loader (native.js) and the CJS bundle (dist/index.cjs).
      build.onLoad({ filter: /[\\/]lmdb[\\/](?:native\.js|dist[\\/]index\.cjs)$/ }, async (args) => {
        const pkgDir = dirname(args.path).replace(/[\\/]dist$/, "");
        const pkg = lmdbPlatformPackage(target);
        const addon = resolveAddon(pkgDir, pkg, target);
        if (!addon) throw new Error(`lmdb: no N-API prebuild for ${pkg} (libc=${target.libc}) under ${pkgDir}`);
        const src = await Bun.file(args.path).text();
        const call = /\bloadNAPI(?:__default\["default"\])?\(dirName\)/g;
        const hits = src.match(call)?.length ?? 0;
        if (hits !== 1) throw new Error(`lmdb loader changed: expected 1 loadNAPI(dirName) call in ${args.path}, found ${hits}`);
        embedded.set("lmdb", addon);
        return { contents: shrinkLmdbReadBuffer(src.replace(call, `require(${JSON.stringify(addon)})`), args.path), loader: "js" };
      });

      // lmdb's reader, with the small read buffer (lmdb-read-buffer.ts; the loaders above get theirs there).
      build.onLoad({ filter: /[\\/]lmdb[\\/]read\.js$/ }, loadWithSmallReadBuffer);

      // msgpackr-extract (optional speed-up used by msgpackr, which lmdb uses):
      // embed it when the platform package exists, else export null so msgpackr
      // silently keeps its pure-JS decoder (it treats a falsy extractor as absent).
      build.onLoad({ filter: /[\\/]msgpackr-extract[\\/]index\.js$/ }, (args) => {
        const addon = resolveAddon(dirname(args.path), extractPlatformPackage(target), target);
        if (addon) embedded.set("msgpackr-extract", addon);
        return {
          contents: addon ? `module.exports = require(${JSON.stringify(addon)});` : "module.exports = null;",
          loader: "js",
        };
      });
    },
  };
}
