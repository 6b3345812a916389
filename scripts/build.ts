/**
 * Builds tokenmint into ONE self-contained executable with `Bun.build({ compile })`.
 *
 *   bun scripts/build.ts [--entry src/main.ts] [--outfile dist/tokenmint]
 *                        [--target bun-linux-arm64] [--no-minify] [--no-sourcemap] [--no-bytecode]
 *
 * lmdb loads its native addon through node-gyp-build-optional-packages, which
 * searches node_modules at run time; Bun only embeds `.node` files required by
 * a literal path. scripts/build/native-addons.ts rewrites those loaders at
 * bundle time so the addon for the build target is embedded, and the binary
 * runs from an empty directory with no Bun, Node or node_modules around.
 *
 * The modules are embedded as JavaScriptCore bytecode beside their source (ESM bytecode needs
 * `compile`), so a process starts without parsing them: start to first answer about twice as
 * fast, and a little less memory per process. The source stays for Function#toString and stack
 * traces. Bytecode is tied to the Bun version that builds it, which is the runtime embedded.
 *
 * Also injects TOKENMINT_VERSION (package.json) and TOKENMINT_COMMIT
 * (`git rev-parse --short HEAD`, or "unknown"); src/version.ts reads them.
 *
 * Cross-targets never download anything: they need @lmdb/lmdb-<os>-<arch> and
 * the target's Bun runtime (@oven/bun-<os>-<arch> or --bun-binary) on disk.
 */
import { existsSync, mkdirSync, rmSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import {
  type EmbeddedAddons,
  lmdbPlatformPackage,
  nativeAddonsPlugin,
  parseTarget,
  resolveAddon,
} from "./build/native-addons.ts";

const root = resolve(import.meta.dir, "..");

function fail(message: string): never {
  console.error(`build: ${message}`);
  process.exit(1);
}

const { values: opts } = parseArgs({
  options: {
    entry: { type: "string", default: join(root, "src/main.ts") },
    outfile: { type: "string", default: join(root, "dist/tokenmint") },
    target: { type: "string" },
    "bun-binary": { type: "string" },
    "no-minify": { type: "boolean", default: false },
    "no-sourcemap": { type: "boolean", default: false },
    "no-bytecode": { type: "boolean", default: false },
  },
  strict: true,
});

const entry = resolve(opts.entry);
const outfile = resolve(opts.outfile);
if (!existsSync(entry)) fail(`entry not found: ${entry}`);

let target: ReturnType<typeof parseTarget>;
try {
  target = parseTarget(opts.target);
} catch (err) {
  fail((err as Error).message);
}

// The lmdb prebuild for the target must be installed; we never fetch one.
const lmdbDir = join(root, "node_modules", "lmdb");
const lmdbPkg = lmdbPlatformPackage(target);
if (!resolveAddon(lmdbDir, lmdbPkg, target)) {
  const lmdbManifest = join(lmdbDir, "package.json");
  const lmdbVersion = existsSync(lmdbManifest)
    ? ((await Bun.file(lmdbManifest).json()) as { version: string }).version
    : "?";
  fail(
    `no lmdb N-API prebuild for ${opts.target ?? "the host"} (${lmdbPkg}, libc=${target.libc ?? "n/a"}).\n` +
      `  Install it first, e.g. \`npm install --no-save --force ${lmdbPkg}@${lmdbVersion}\`; this script does not download.`,
  );
}

// A target other than the running Bun needs that target's Bun runtime on disk;
// otherwise Bun would try to download it. Host builds reuse the running Bun.
const exactHost = target.isHost && (opts.target === undefined || !/-(baseline|modern)/.test(opts.target));
let executablePath = opts["bun-binary"] ? resolve(opts["bun-binary"]) : undefined;
if (!exactHost && executablePath === undefined) {
  const flavour = opts.target!.replace(/^bun-(linux|darwin|windows)-(x64|arm64)/, "").replace("-modern", "");
  const ovenPkg = `@oven/bun-${target.platform === "win32" ? "windows" : target.platform}-${
    target.arch === "arm64" ? "aarch64" : "x64"
  }${flavour}`;
  const candidate = join(root, "node_modules", ovenPkg, "bin", target.platform === "win32" ? "bun.exe" : "bun");
  if (!existsSync(candidate)) {
    fail(
      `cross-compiling to ${opts.target} needs that target's Bun runtime, not found at ${candidate}.\n` +
        `  Install ${ovenPkg}@${Bun.version} (npm install --no-save --force) or pass --bun-binary PATH; this script does not download.`,
    );
  }
  executablePath = candidate;
}
if (executablePath !== undefined && !existsSync(executablePath)) fail(`--bun-binary not found: ${executablePath}`);

const pkg = (await Bun.file(join(root, "package.json")).json()) as { version?: string };
const version = pkg.version ?? "0.0.0";
const git = Bun.spawnSync(["git", "rev-parse", "--short", "HEAD"], { cwd: root, stderr: "ignore" });
const commit = (git.success && git.stdout.toString().trim()) || "unknown";

mkdirSync(dirname(outfile), { recursive: true });
const embedded: EmbeddedAddons = new Map();

let result: Awaited<ReturnType<typeof Bun.build>>;
try {
  result = await Bun.build({
    entrypoints: [entry],
    compile: {
      outfile,
      // Omitted for the host so Bun reuses itself instead of looking up a runtime.
      ...(!exactHost && { target: opts.target as Bun.Build.CompileTarget }),
      ...(executablePath !== undefined && { executablePath }),
      // A server binary should not pick up .env / bunfig.toml from whatever cwd it is started in.
      autoloadDotenv: false,
      autoloadBunfig: false,
    },
    // Elysia recommends whitespace+syntax minification but not identifier mangling.
    minify: opts["no-minify"] ? false : { whitespace: true, syntax: true, identifiers: false },
    sourcemap: opts["no-sourcemap"] ? "none" : "linked",
    ...(!opts["no-bytecode"] && { bytecode: true, format: "esm" as const }),
    define: {
      TOKENMINT_VERSION: JSON.stringify(version),
      TOKENMINT_COMMIT: JSON.stringify(commit),
    },
    plugins: [nativeAddonsPlugin(target, embedded)],
  });
} catch (err) {
  // Bun.build throws an AggregateError carrying the build logs.
  const logs = err instanceof AggregateError ? err.errors : [err];
  for (const log of logs) console.error(log);
  fail("Bun.build failed");
}
if (!result.success) {
  for (const log of result.logs) console.error(log);
  fail("Bun.build failed");
}
if (!embedded.has("lmdb")) {
  console.warn("build: warning: lmdb's loader was not bundled (entry does not import lmdb?)");
}

// With compile, Bun embeds the sourcemap in the executable (stack traces map
// to sources) and also writes a redundant <outfile>.map; drop it so the
// output is exactly one file.
rmSync(`${outfile}.map`, { force: true });

const rel = (p: string): string => (p.startsWith(root) ? relative(root, p) : p);
for (const [name, addon] of embedded) console.log(`embedded ${name}: ${rel(addon)}`);
const mib = (statSync(outfile).size / 1024 / 1024).toFixed(1);
console.log(`built ${outfile} (${mib} MiB) version=${version} commit=${commit} target=${opts.target ?? "host"}`);
