/**
 * What the README says of requests the runtime's HTTP parser refuses before tokenmint sees them:
 * 400 or 431 with an empty body, or no answer to a method it does not know, and the connection
 * closed; a body over the runtime's own limit the same way. Large headers below the limit pass.
 */
import { afterEach, expect, test } from "bun:test";
import { connect } from "node:net";
import { cleanup, createApiKeyWithCli, startServer } from "./process.ts";

afterEach(cleanup);

/** Sends `raw` on a new connection; resolves with everything read until the server closes it. */
function exchange(port: number, raw: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = "";
    const socket = connect(port, "127.0.0.1", () => socket.write(raw));
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (data += chunk));
    socket.on("close", () => resolve(data));
    socket.on("error", reject);
    socket.setTimeout(5000, () => socket.destroy(new Error(`no close after: ${JSON.stringify(data)}`)));
  });
}

test("unreadable requests get 400 or 431 with an empty body from the HTTP parser, an unknown method no answer; 12 KiB of headers pass", async () => {
  const server = await startServer();
  const get = (headers: string) => `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers}Connection: close\r\n\r\n`;
  const cases: [string, string][] = [
    ["GARBAGE\r\n\r\n", "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"],
    [get("Bad Header\r\n"), "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"],
    [get(`X-A: ${"a".repeat(9000)}\r\nX-B: ${"b".repeat(9000)}\r\n`), "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n"],
  ];
  for (const [raw, answer] of cases) expect(await exchange(server.port, raw)).toBe(answer);
  // A method the parser does not know: the connection closes without an answer.
  expect(await exchange(server.port, "FOO /v1/providers HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")).toBe("");
  const big = await exchange(server.port, get(`X-A: ${"a".repeat(6000)}\r\nX-B: ${"b".repeat(6000)}\r\n`));
  expect(big).toStartWith("HTTP/1.1 200 OK\r\n");
  expect(await server.proc.stop()).toBe(0);
});

test("a body over the runtime's limit (1 MiB with the default settings) gets 413 with an empty body from the runtime; below it, tokenmint's own 413", async () => {
  const server = await startServer();
  const post = (length: number) =>
    `POST /v1/providers HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${"k".repeat(40)}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n`;
  // Only the head is sent: the runtime answers from the declared length.
  const over = await exchange(server.port, post((1 << 20) + 1));
  expect(over).toMatch(/^HTTP\/1\.1 413 [A-Za-z ]+\r\n/);
  expect(over.slice(over.indexOf("\r\n\r\n") + 4)).toBe("");
  // The API key is checked first; over TOKENMINT_MAX_BODY_BYTES but within the runtime's limit: JSON.
  const key = await createApiKeyWithCli(server);
  const within = await fetch(`${server.url}/v1/providers`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "x".repeat(100_000) }),
  });
  expect(within.status).toBe(413);
  expect(await within.json()).toMatchObject({ code: "payload_too_large" });
  expect(await server.proc.stop()).toBe(0);
});
