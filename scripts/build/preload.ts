/**
 * Preloaded by `bun` in this repository (bunfig.toml), for runs and tests alike: loads lmdb with
 * the small read buffer the executable is built with (lmdb-read-buffer.ts).
 */
import { plugin } from "bun";
import { LMDB_READ_BUFFER_FILES, loadWithSmallReadBuffer } from "./lmdb-read-buffer.ts";

plugin({
  name: "tokenmint-lmdb-read-buffer",
  setup(build) {
    build.onLoad({ filter: LMDB_READ_BUFFER_FILES }, loadWithSmallReadBuffer);
  },
});
