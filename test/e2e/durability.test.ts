/**
 * CONTRACT §3: a 2xx to a write means the write survives `kill -9` straight after the answer.
 * Also the signing keys: a token issued before the kill still verifies after the restart.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from "jose";
import { api, cleanup, createApiKeyWithCli, newMasterKey, startServer } from "./process.ts";

afterEach(cleanup);

describe("durability across kill -9", () => {
  test("records written with a 2xx answer and the signing key survive SIGKILL", async () => {
    const masterKey = newMasterKey();
    const issuer = "http://issuer.durability.test";
    const settings = { TOKENMINT_PUBLIC_URL: issuer };
    const first = await startServer({ masterKey, settings });
    const apiKey = await createApiKeyWithCli(first, "e2e");

    const providerRes = await api(first, apiKey, "POST", "/v1/providers", { name: "durable-provider" });
    expect(providerRes.status).toBe(201);
    const provider = (await providerRes.json()) as { id: string };
    const clientRes = await api(first, apiKey, "POST", `/v1/providers/${provider.id}/clients`, { name: "durable-client", audience: "https://api.durable.test" });
    expect(clientRes.status).toBe(201);
    const client = (await clientRes.json()) as { id: string };
    const tokenRes = await api(first, apiKey, "POST", `/v1/providers/${provider.id}/clients/${client.id}/tokens`);
    expect(tokenRes.status).toBe(201);
    const { accessToken } = (await tokenRes.json()) as { accessToken: string };

    // Straight after the last answer, no graceful shutdown.
    expect(await first.proc.stop("SIGKILL")).not.toBe(0);
    expect(first.proc.signalCode).toBe("SIGKILL");

    const second = await startServer({ dataDir: first.dataDir, masterKey, settings });
    const gotProvider = await api(second, apiKey, "GET", `/v1/providers/${provider.id}`);
    expect(gotProvider.status).toBe(200);
    expect(((await gotProvider.json()) as { name: string }).name).toBe("durable-provider");
    const gotClient = await api(second, apiKey, "GET", `/v1/providers/${provider.id}/clients/${client.id}`);
    expect(gotClient.status).toBe(200);
    expect(await gotClient.json()).toMatchObject({ id: client.id, name: "durable-client", audience: "https://api.durable.test" });

    const jwks = (await (await fetch(`${second.url}/.well-known/jwks`)).json()) as JSONWebKeySet;
    const { kid } = decodeProtectedHeader(accessToken);
    expect(jwks.keys.map((k) => k.kid)).toContain(kid as string);
    const { payload } = await jwtVerify(accessToken, createLocalJWKSet(jwks), { issuer, audience: "https://api.durable.test", typ: "at+jwt" });
    expect(payload.sub).toBe(client.id);

    expect(await second.proc.stop("SIGTERM")).toBe(0);
  });
});
