/**
 * What the README says of requests the runtime's HTTP parser refuses before tokenmint sees them:
 * 400 or 431 with an empty body, or no answer to a method it does not know, and the connection
 * closed. Large headers below the limit pass. A body over the limit is tokenmint's own 413, whatever
 * its size: the runtime's limit, whose 413 would have no body, is set past any body.
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

/** A raw answer's status line, lower-cased head and body, once it has all come; undefined before. */
function parseAnswer(raw: string): { status: string; head: string; body: string } | undefined {
  const end = raw.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const head = raw.slice(0, end).toLowerCase();
  const length = Number(/\r\ncontent-length: (\d+)/.exec(head)?.[1] ?? 0);
  if (raw.length < end + 4 + length) return undefined;
  return { status: raw.slice(0, raw.indexOf("\r\n")), head, body: raw.slice(end + 4, end + 4 + length) };
}

/**
 * Sends `head` and then `total` bytes of body (as 64 KiB chunks when `chunked`), reading while it
 * writes. Resolves with the first answer and, when `then` is given, what answers `then`, sent on
 * the same connection after the body.
 */
function sendBody(port: number, head: string, total: number, chunked: boolean, then?: string) {
  return new Promise<{ answer: ReturnType<typeof parseAnswer>; next?: string }>((resolve, reject) => {
    let data = "";
    let written = 0;
    let first: { answer: ReturnType<typeof parseAnswer> } | undefined;
    const piece = Buffer.alloc(64 * 1024, "a");
    const socket = connect(port, "127.0.0.1", () => {
      socket.write(head);
      pump();
    });
    const pump = () => {
      while (written < total) {
        const size = Math.min(piece.byteLength, total - written);
        const bytes = chunked ? Buffer.concat([Buffer.from(`${size.toString(16)}\r\n`), piece.subarray(0, size), Buffer.from("\r\n")]) : piece.subarray(0, size);
        written += size;
        if (!socket.write(bytes)) return void socket.once("drain", pump);
      }
      if (chunked) socket.write("0\r\n\r\n");
      if (then === undefined) return;
      socket.write(then);
    };
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      data += chunk;
      if (first !== undefined) return;
      const answer = parseAnswer(data);
      if (answer === undefined) return;
      first = { answer };
      data = data.slice(data.indexOf("\r\n\r\n") + 4 + answer.body.length);
      if (then === undefined) {
        socket.destroy();
        resolve(first);
      }
    });
    socket.on("close", () => (first === undefined ? reject(new Error(`closed without an answer: ${JSON.stringify(data)}`)) : resolve({ ...first, next: data })));
    socket.on("error", reject);
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no answer after ${written} bytes: ${JSON.stringify(data)}`)));
  });
}

/** The resident memory of process `pid`, in bytes. */
const rssOf = async (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(await Bun.file(`/proc/${pid}/status`).text())?.[1]) * 1024;

test("any body over TOKENMINT_MAX_BODY_BYTES gets tokenmint's JSON 413, however large it is or claims to be, without keeping it; the connection goes on", async () => {
  const server = await startServer({ settings: { TOKENMINT_MAX_BODY_BYTES: "65536" } });
  const key = await createApiKeyWithCli(server);
  const head = (framing: string) =>
    `POST /v1/providers HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n${framing}\r\n`;
  const tooLarge = { code: "payload_too_large", message: "The request body is larger than 65536 bytes." };
  // A declared length past the runtime's default limit of 128 MiB, up to 10 GiB: the answer comes from the head alone.
  for (const length of [65_537, 200 * 2 ** 20, 10 * 2 ** 30]) {
    const { answer } = await sendBody(server.port, head(`Content-Length: ${length}\r\n`), 0, false);
    expect({ length, status: answer?.status, body: JSON.parse(answer?.body ?? "") }).toEqual({ length, status: "HTTP/1.1 413 Payload Too Large", body: tooLarge });
  }
  // 256 MiB sent, declared or chunked: answered, the body not kept, and the next request on the
  // connection answered.
  const before = await rssOf(server.proc.pid);
  const total = 256 * 2 ** 20;
  const healthz = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  for (const [framing, chunked] of [[`Content-Length: ${total}\r\n`, false], ["Transfer-Encoding: chunked\r\n", true]] as const) {
    const { answer, next } = await sendBody(server.port, head(framing), total, chunked, healthz);
    expect({ framing, status: answer?.status, body: JSON.parse(answer?.body ?? "") }).toEqual({ framing, status: "HTTP/1.1 413 Payload Too Large", body: tooLarge });
    expect(parseAnswer(next ?? "")?.status).toBe("HTTP/1.1 200 OK");
  }
  expect(await rssOf(server.proc.pid)).toBeLessThan(before + 64 * 2 ** 20);
  // Within the limit, the body is taken.
  const within = await fetch(`${server.url}/v1/providers`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "x".repeat(200) }),
  });
  expect(within.status).toBe(201);
  expect(await server.proc.stop()).toBe(0);
});

test("a Content-Length sent twice with one value frames the body as one: the write, the token and /oauth/token are answered as usual", async () => {
  const server = await startServer();
  const key = await createApiKeyWithCli(server);
  const post = (path: string, type: string, body: string, lengths: string, auth = `Bearer ${key}`) =>
    exchange(server.port, `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${auth}\r\nContent-Type: ${type}\r\n${lengths}Connection: close\r\n\r\n${body}`);
  const twice = (body: string) => `Content-Length: ${body.length}\r\nContent-Length: ${body.length}\r\n`;
  const json = (raw: string) => ({ status: raw.slice(0, raw.indexOf("\r\n")), body: JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4)) as Record<string, unknown> });

  const provider = json(await post("/v1/providers", "application/json", '{"name":"p"}', twice('{"name":"p"}')));
  expect(provider).toMatchObject({ status: "HTTP/1.1 201 Created", body: { name: "p" } });
  const clientBody = '{"name":"c","audience":"urn:a"}';
  const client = json(await post(`/v1/providers/${provider.body.id}/clients`, "application/json", clientBody, twice(clientBody)));
  expect(client.status).toBe("HTTP/1.1 201 Created");
  const token = json(await post(`/v1/providers/${provider.body.id}/clients/${client.body.id}/tokens`, "application/json", '{"expiresIn":60}', twice('{"expiresIn":60}')));
  expect(token).toMatchObject({ status: "HTTP/1.1 201 Created", body: { type: "Bearer" } });
  const secret = (await (
    await fetch(`${server.url}/v1/providers/${provider.body.id}/clients/${client.body.id}/secrets`, { method: "POST", headers: { authorization: `Bearer ${key}` } })
  ).json()) as { secret: string };
  const form = "grant_type=client_credentials";
  const basic = `Basic ${btoa(`${client.body.id}:${encodeURIComponent(secret.secret)}`)}`;
  expect(json(await post("/oauth/token", "application/x-www-form-urlencoded", form, twice(form), basic))).toMatchObject({
    status: "HTTP/1.1 200 OK",
    body: { token_type: "Bearer" },
  });
  // Two values that differ are refused by the runtime's parser, and nothing is written.
  expect(await post("/v1/providers", "application/json", '{"name":"q"}', "Content-Length: 12\r\nContent-Length: 13\r\n")).toStartWith("HTTP/1.1 400 Bad Request\r\n");
  const listed = (await (await fetch(`${server.url}/v1/providers`, { headers: { authorization: `Bearer ${key}` } })).json()) as { items: { name: string }[] };
  expect(listed.items.map((p) => p.name)).toEqual(["p"]);
  expect(await server.proc.stop()).toBe(0);
});
