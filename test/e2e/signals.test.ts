/**
 * CONTRACT §1: SIGTERM/SIGINT (and SIGHUP) stop accepting, finish in-flight requests, close the store, exit 0;
 * as one process and with workers (the primary passes the signal on and waits for all of them).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { api, cleanup, createApiKeyWithCli, freePort, isAlive, newMasterKey, processEnv, spawnTokenmint, startServer, tempDataDir, waitFor, within, type Server } from "./process.ts";

afterEach(cleanup);

/** The answer to a raw HTTP/1.1 request, or the connection error that ended it. */
interface RawAnswer {
  status?: number;
  body?: string;
  error?: string;
}

/**
 * Sends `request` on its own TCP connection (Connection: close). `sent` resolves once the
 * connection is open and every byte is written; `answer` once the server has closed it.
 */
function rawRequest(port: number, request: string): { sent: Promise<void>; answer: Promise<RawAnswer> } {
  let markSent!: () => void;
  let failSent!: (error: Error) => void;
  const sent = new Promise<void>((resolve, reject) => ((markSent = resolve), (failSent = reject)));
  const answer = new Promise<RawAnswer>((resolve) => {
    const chunks: Uint8Array[] = [];
    const fail = (error: unknown) => {
      const text = `${(error as { code?: string }).code ?? (error as Error).message}`;
      failSent(new Error(text));
      resolve({ error: text });
    };
    Bun.connect({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(socket) {
          if (socket.write(request) === request.length) markSent();
          else fail(new Error("request only partly written"));
        },
        data(_socket, data) {
          chunks.push(new Uint8Array(data));
        },
        close() {
          const text = Buffer.concat(chunks).toString("utf8");
          const match = /^HTTP\/1\.1 (\d{3})[^\r\n]*\r\n([\s\S]*?)\r\n\r\n([\s\S]*)$/.exec(text);
          resolve(match === null ? { error: text === "" ? "connection closed without an answer" : `malformed answer: ${text.slice(0, 80)}` } : { status: Number(match[1]), body: match[3] });
        },
        error(_socket, error) {
          fail(error);
        },
        connectError(_socket, error) {
          fail(error);
        },
      },
    }).catch(fail);
  });
  return { sent, answer };
}

/** The JSON object in an HTTP/1.1 body (plain or chunked: the object lies between its outer braces). */
function jsonOf(body: string): { code?: string } {
  const start = body.indexOf("{");
  const end = body.lastIndexOf("}");
  return JSON.parse(body.slice(start, end + 1)) as { code?: string };
}

async function providerAndClient(server: Server, apiKey: string): Promise<{ providerId: string; clientId: string }> {
  const provider = (await (await api(server, apiKey, "POST", "/v1/providers", { name: "signals" })).json()) as { id: string };
  const res = await api(server, apiKey, "POST", `/v1/providers/${provider.id}/clients`, { name: "signals", audience: "https://api.signals.test" });
  expect(res.status).toBe(201);
  return { providerId: provider.id, clientId: ((await res.json()) as { id: string }).id };
}

for (const workers of [1, 2]) {
  describe(`signals (${workers === 1 ? "one process" : `${workers} workers`})`, () => {
    const start = () => startServer({ settings: { TOKENMINT_WORKERS: String(workers) } });
    /** The pids of the workers (none for a single process), once the instance has started. */
    const workerPids = async (server: Server) =>
      workers === 1
        ? []
        : waitFor("every worker to start", () => {
            const pids = server.proc.logs().filter((line) => line.msg === "worker started").map((line) => line.pid as number);
            return pids.length >= workers ? pids : undefined;
          });

    for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
      test(`${signal} stops the server with exit code 0 and a 'stopped' line`, async () => {
        const server = await start();
        const pids = await workerPids(server);
        const started = Date.now();
        expect(await server.proc.stop(signal, 10_000)).toBe(0);
        expect(Date.now() - started).toBeLessThan(10_000);
        const messages = server.proc.logs().map((line) => line.msg);
        expect(messages).toContain("stopped");
        expect(messages.at(-1)).toBe("stopped");
        expect(server.proc.logs().find((line) => line.msg === "shutting down")?.signal).toBe(signal);
        expect(server.proc.stderr.filter((line) => line.trim() !== "")).toEqual([]);
        // Every worker drained and stopped before the primary did.
        const stoppedWorkers = server.proc.logs().filter((line) => line.msg === "stopped" && line.worker !== undefined);
        expect(stoppedWorkers).toHaveLength(workers === 1 ? 0 : workers);
        for (const pid of pids) expect(isAlive(pid)).toBe(false);
      });
    }

    test("requests sent before SIGTERM all get a complete answer (201 or 503 unavailable)", async () => {
      const server = await start();
      const pids = await workerPids(server);
      const apiKey = await createApiKeyWithCli(server);
      const { providerId, clientId } = await providerAndClient(server, apiKey);
      const request =
        `POST /v1/providers/${providerId}/clients/${clientId}/tokens HTTP/1.1\r\n` +
        `Host: 127.0.0.1:${server.port}\r\nAuthorization: Bearer ${apiKey}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`;

      const requests = Array.from({ length: 30 }, () => rawRequest(server.port, request));
      await Promise.all(requests.map((r) => r.sent));
      server.proc.signal("SIGTERM");
      const answers = await within(Promise.all(requests.map((r) => r.answer)), 10_000);
      expect(answers).toBeDefined();

      const summary = (answers as RawAnswer[]).map((a) =>
        a.error !== undefined ? `error: ${a.error}` : a.status === 201 ? "201" : `${a.status} ${jsonOf(a.body as string).code}`,
      );
      expect(summary.filter((s) => s !== "201" && s !== "503 unavailable")).toEqual([]);
      expect(await within(server.proc.exited, 10_000)).toBe(0);
      expect(server.proc.logs().map((line) => line.msg)).toContain("stopped");
      for (const pid of pids) expect(isAlive(pid)).toBe(false);
    });
  });
}

describe("a signal during start-up", () => {
  test("stops the server once it has started, with exit 0: the handlers are in place before the data is opened", async () => {
    for (const workers of ["1", "2"]) {
      const env = processEnv({
        TOKENMINT_DATA_DIR: tempDataDir(),
        TOKENMINT_HOST: "127.0.0.1",
        TOKENMINT_PORT: String(await freePort()),
        TOKENMINT_MASTER_KEY: newMasterKey(),
        TOKENMINT_SIGNING_ALG: "ES256",
        TOKENMINT_WORKERS: workers,
      });
      const proc = spawnTokenmint(["serve"], env);
      // The first line comes while the data is being opened, before the server listens.
      await waitFor("the first log line", () => (proc.stdout.length > 0 ? true : undefined), 10_000);
      proc.signal("SIGTERM");
      expect({ workers, code: await within(proc.exited, 15_000) }).toEqual({ workers, code: 0 });
      expect(proc.logs().some((line) => line.msg === "stopped")).toBe(true);
    }
  }, 40_000);
});
