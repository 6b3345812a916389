/**
 * lmdb's read buffer, made small.
 *
 * lmdb copies every value it reads into one shared buffer, which its native addon allocates at
 * 16 MiB when it loads, and replaces with a buffer twice the value's size when a value does not
 * fit. JavaScriptCore counts that buffer as heap memory of the process, and with it in the heap
 * the runtime's allocator hands memory back to the kernel and takes it again far more often under
 * load (page faults and TLB flushes on every request). Starting the buffer at READ_BUFFER_BYTES
 * instead lets the big one be collected, and a request costs less CPU (docs/performance.md,
 * "lmdb's read buffer").
 *
 * The change is made to lmdb's source as it loads: at bundle time for the executable
 * (native-addons.ts) and through the preload (bunfig.toml) for `bun` runs and tests, so both run
 * the same code. Each edit must match exactly once, or loading fails: an lmdb release that moves
 * this code is found at once, never run half-changed.
 */

/** Size the read buffer starts at; lmdb grows it for a larger value, as it always did. */
export const READ_BUFFER_BYTES = 0x10000;

/** lmdb's source files this changes: the ESM loader and reader, and the CJS bundle holding both. */
export const LMDB_READ_BUFFER_FILES = /[\\/]lmdb[\\/](?:native\.js|read\.js|dist[\\/]index\.cjs)$/;

/** The loader takes the addon's 16 MiB buffer: it keeps it no longer, so it can be collected. */
const TAKE_GLOBAL = "globalBuffer = externals.globalBuffer;";
const DROP_GLOBAL = "globalBuffer = undefined; externals.globalBuffer = undefined;";
/** The reader starts with that buffer: it starts with a small one of its own, handed to the addon as lmdb does when it grows it. */
const START_WITH_GLOBAL = "let getValueBytes = globalBuffer;";
const START_SMALL = `let getValueBytes = makeReusableBuffer(${READ_BUFFER_BYTES}); getValueBytes.isGlobal = true; setGlobalBuffer(getValueBytes);`;

function replaceOnce(source: string, from: string, to: string, path: string): string {
  const at = source.indexOf(from);
  if (at === -1 || source.indexOf(from, at + from.length) !== -1) {
    throw new Error(`lmdb changed: expected "${from}" exactly once in ${path}`);
  }
  return source.slice(0, at) + to + source.slice(at + from.length);
}

/** `source` of the lmdb file at `path` with the read buffer made small; throws if lmdb's code is not as expected. */
export function shrinkLmdbReadBuffer(source: string, path: string): string {
  const file = path.replace(/\\/g, "/");
  let out = source;
  if (file.endsWith("/native.js") || file.endsWith("/dist/index.cjs")) out = replaceOnce(out, TAKE_GLOBAL, DROP_GLOBAL, path);
  if (file.endsWith("/read.js") || file.endsWith("/dist/index.cjs")) out = replaceOnce(out, START_WITH_GLOBAL, START_SMALL, path);
  if (out === source) throw new Error(`not an lmdb file this changes: ${path}`);
  return out;
}

/** An `onLoad` callback (bundler and runtime plugins alike) giving the lmdb file at `path` with the read buffer made small. */
export async function loadWithSmallReadBuffer(args: { path: string }): Promise<{ contents: string; loader: "js" }> {
  return { contents: shrinkLmdbReadBuffer(await Bun.file(args.path).text(), args.path), loader: "js" };
}
