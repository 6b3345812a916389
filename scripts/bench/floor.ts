/**
 * The HTTP floor: a trivial Elysia server that does what the token endpoint does minus the
 * service's own work. It parses the same JSON body and answers a body of similar size, so
 * tokens/s ÷ floor/s shows what issuing costs beyond HTTP itself. It runs as many processes as
 * the service runs workers, all on one port (`reusePort`), so both have the machine alike.
 *
 *   bun scripts/bench/floor.ts PORT [PROCESSES] [GET_BYTES]
 *
 * GET_BYTES sizes the GET answer (the bench passes the length of the JWKS it measured).
 */
import { Elysia } from "elysia";

const port = Number(process.argv[2]);
const processes = Number(process.argv[3] ?? "1");
const getBytes = Number(process.argv[4] ?? "700");

// The other processes, stopped with this one.
const others = Array.from({ length: Math.max(0, processes - 1) }, () =>
  Bun.spawn([process.execPath, import.meta.path, String(port), "1", String(getBytes)], { stdout: "ignore", stderr: "inherit" }),
);
process.on("SIGTERM", () => {
  for (const other of others) other.kill("SIGTERM");
  process.exit(0);
});

// About the size of a token answer (RS256 JWT plus expiresAt and type).
const filler = "x".repeat(560);
// The key set's size less its fixed members.
const modulus = "x".repeat(Math.max(0, getBytes - 82));
const app = new Elysia()
  .post("/tokens", ({ body, set }) => {
    set.status = 201;
    set.headers["cache-control"] = "no-store";
    return { accessToken: filler, expiresAt: new Date().toISOString(), type: "Bearer", echo: (body as { expiresIn?: number }).expiresIn };
  })
  .get("/jwks", ({ set }) => {
    set.headers["cache-control"] = "public, max-age=300";
    return { keys: [{ kty: "RSA", n: modulus, e: "AQAB", kid: "floor", alg: "RS256", use: "sig" }] };
  });
Bun.serve({ hostname: "127.0.0.1", port, reusePort: true, fetch: (request) => app.handle(request) });
