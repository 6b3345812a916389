/**
 * The HTTP floor: a trivial Elysia server that does what the token endpoint does minus the
 * service's own work. It parses the same JSON body and answers a body of similar size, so
 * tokens/s ÷ floor/s shows what issuing costs beyond HTTP itself.
 *
 *   bun scripts/bench/floor.ts PORT
 */
import { Elysia } from "elysia";

const port = Number(process.argv[2]);
// About the size of a token answer (RS256 JWT plus expiresAt and type).
const filler = "x".repeat(560);
const app = new Elysia()
  .post("/tokens", ({ body, set }) => {
    set.status = 201;
    set.headers["cache-control"] = "no-store";
    return { accessToken: filler, expiresAt: new Date().toISOString(), type: "Bearer", echo: (body as { expiresIn?: number }).expiresIn };
  })
  .get("/jwks", ({ set }) => {
    set.headers["cache-control"] = "public, max-age=300";
    return { keys: [{ kty: "RSA", n: filler, e: "AQAB", kid: "floor", alg: "RS256", use: "sig" }] };
  });
Bun.serve({ hostname: "127.0.0.1", port, fetch: (request) => app.handle(request) });
console.log("ready");
