/**
 * A server started on RS256 keys answers before it loads libcrypto (startup.ts, `libcrypto`) and
 * signs with libcrypto soon after, in one process and with workers: the log says which signers
 * the machine uses once, after "tokenmint started", every process that signs maps libcrypto
 * within seconds, and its tokens verify against the JWKS. (That the built-in signer and libcrypto's
 * give the very same tokens is test/keys/signers.test.ts.)
 * Needs the system's OpenSSL 3 (`libcrypto.so.3`, Debian's libssl3).
 */
import { afterEach, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from "jose";
import { api, cleanup, createApiKeyWithCli, startServer, waitFor, type Server } from "./process.ts";

afterEach(cleanup);

const mapsLibcrypto = (pid: number) => readFileSync(`/proc/${pid}/maps`, "utf8").includes("libcrypto.so");

/** Issues a token through the API and verifies it against the served JWKS; returns its `alg`. */
async function issueAndVerify(server: Server, apiKey: string, ids: { providerId: string; clientId: string }): Promise<string | undefined> {
  const issued = await api(server, apiKey, "POST", `/v1/providers/${ids.providerId}/clients/${ids.clientId}/tokens`, {});
  expect(issued.status).toBe(201);
  const { accessToken } = (await issued.json()) as { accessToken: string };
  const jwks = (await (await fetch(`${server.url}/.well-known/jwks`)).json()) as JSONWebKeySet;
  const { payload } = await jwtVerify(accessToken, createLocalJWKSet(jwks), { audience: "https://api.test" });
  expect(payload.sub).toBe(ids.clientId);
  return decodeProtectedHeader(accessToken).alg;
}

for (const workers of [1, 2]) {
  test(`TOKENMINT_WORKERS=${workers}: RS256 answers first, then every signing process moves to libcrypto; the signers are logged once, after start`, async () => {
    const server = await startServer({ settings: { TOKENMINT_SIGNING_ALG: "RS256", TOKENMINT_WORKERS: String(workers) } });
    const apiKey = await createApiKeyWithCli(server);
    const provider = (await (await api(server, apiKey, "POST", "/v1/providers", { name: "p" })).json()) as { id: string };
    const client = (await (await api(server, apiKey, "POST", `/v1/providers/${provider.id}/clients`, { name: "c", audience: "https://api.test" })).json()) as { id: string };
    const ids = { providerId: provider.id, clientId: client.id };
    expect(await issueAndVerify(server, apiKey, ids)).toBe("RS256");

    const logs = () => server.proc.logs();
    await waitFor("the signers line", () => (logs().some((line) => line.msg === "signers") ? true : undefined));
    const started = logs().findIndex((line) => line.msg === "tokenmint started");
    const signers = logs().filter((line) => line.msg === "signers");
    expect(signers).toEqual([expect.objectContaining({ RS256: "libcrypto", ES256: "node-sync", EdDSA: "node-sync", libcrypto: expect.stringMatching(/^OpenSSL 3\./) })]);
    expect(signers[0]?.worker).toBeUndefined();
    // Finding out which signers there are loads libcrypto: said after start, it was not loaded before.
    expect(logs().findIndex((line) => line.msg === "signers")).toBeGreaterThan(started);

    const signing = workers === 1 ? [server.proc.pid] : logs().filter((line) => line.msg === "worker started").map((line) => line.pid as number);
    expect(signing).toHaveLength(workers);
    await waitFor("libcrypto in every process that signs", () => (signing.every(mapsLibcrypto) ? true : undefined));
    for (let i = 0; i < 8; i++) expect(await issueAndVerify(server, apiKey, ids)).toBe("RS256");
    expect(logs().filter((line) => line.msg === "libcrypto cannot sign; RS256 uses the built-in signer")).toEqual([]);
  }, 30_000);
}
