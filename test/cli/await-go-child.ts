/**
 * A child process for worker-ipc.test.ts: a worker's wait for its primary's go. Prints `go` or
 * `gone` (what `awaitGo` resolved with) and exits.
 * Usage: bun await-go-child.ts, spawned with an IPC channel.
 */
import { awaitGo } from "../../src/cli/worker-ipc.ts";

process.stdout.write((await awaitGo()) ? "go\n" : "gone\n");
process.exit(0);
