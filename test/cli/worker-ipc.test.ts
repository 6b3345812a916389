/**
 * A worker loads while its primary checks the data, and opens the data only once the primary
 * lets it go (cli/worker-ipc.ts, `awaitGo`): it says it has loaded, then waits, and a primary
 * that goes away first ends the wait without a go.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { isWorkerMessage, type WorkerMessage } from "../../src/cli/worker-ipc.ts";

/** Spawns the child with an IPC channel; `loaded` settles on its first message. */
function spawnChild() {
  let onLoaded: (message: WorkerMessage) => void = () => {};
  const loaded = new Promise<WorkerMessage>((resolve) => (onLoaded = resolve));
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, "await-go-child.ts")], {
    stdout: "pipe",
    stderr: "inherit",
    serialization: "json",
    ipc: (message) => {
      if (isWorkerMessage(message)) onLoaded(message);
    },
  });
  return { proc, loaded };
}

test("a worker says it has loaded, waits for its go, and goes on only then", async () => {
  const { proc, loaded } = spawnChild();
  try {
    expect(await loaded).toEqual({ type: "loaded" });
    // Still waiting after a while without a go.
    const early = await Promise.race([proc.exited.then(() => "exited"), Bun.sleep(300).then(() => "waiting")]);
    expect(early).toBe("waiting");
    proc.send({ type: "go" });
    expect(await proc.exited).toBe(0);
    expect(await new Response(proc.stdout).text()).toBe("go\n");
  } finally {
    proc.kill("SIGKILL");
  }
});

test("a worker whose primary goes away before the go ends its wait without one", async () => {
  const { proc, loaded } = spawnChild();
  try {
    await loaded;
    proc.disconnect();
    expect(await proc.exited).toBe(0);
    expect(await new Response(proc.stdout).text()).toBe("gone\n");
  } finally {
    proc.kill("SIGKILL");
  }
});

test("a worker that cannot start says which worker it is on its one stderr line", async () => {
  const proc = Bun.spawn([process.execPath, "src/main.ts", "serve"], {
    cwd: join(import.meta.dir, "../.."),
    env: { PATH: process.env.PATH ?? "", TOKENMINT_WORKER: "3", TOKENMINT_PORT: "99999" },
    stdout: "ignore",
    stderr: "pipe",
    serialization: "json",
    ipc: () => {},
  });
  try {
    expect(await proc.exited).toBe(1);
    expect(await new Response(proc.stderr).text()).toBe("tokenmint: worker 3: invalid settings: TOKENMINT_PORT must be from 1 to 65535, got 99999\n");
  } finally {
    proc.kill("SIGKILL");
  }
});
