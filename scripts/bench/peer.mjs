/**
 * The peer of the benchmark: panva's oidc-provider issuing JWT access tokens by client
 * credentials, run under Node. scripts/bench/peer.ts installs oidc-provider into a temp
 * directory, copies this file there and runs it, so nothing of it enters the repository.
 *
 *   node peer.mjs PORT ALG WORKERS    (ALG: RS256, ES256 or EdDSA)
 *
 * One resource server (audience https://bench.example) takes every token: JWT format, signed with
 * ALG, 3600 s, the default resource of the one client (`bench`, client_secret_basic; peer.ts
 * PEER_CLIENT holds the same values). WORKERS Node processes share the port (node:cluster), each
 * with the same key; prints "ready" once all of them listen.
 */
import cluster from "node:cluster";
import { createPrivateKey, generateKeyPairSync } from "node:crypto";
import { createServer } from "node:http";

const [port, alg, workersText] = process.argv.slice(2);
const workers = Number(workersText ?? "1");
const CLIENT_ID = "bench";
const CLIENT_SECRET = "bench-secret-bench-secret-bench-secret";
const AUDIENCE = "https://bench.example";

function newPrivateJwk() {
  const { privateKey } =
    alg === "RS256" ? generateKeyPairSync("rsa", { modulusLength: 2048 }) : alg === "ES256" ? generateKeyPairSync("ec", { namedCurve: "P-256" }) : generateKeyPairSync("ed25519");
  return { ...privateKey.export({ format: "jwk" }), alg, use: "sig", kid: `bench-${alg}` };
}

if (cluster.isPrimary && workers > 1) {
  // One key for all workers, handed down through the environment.
  const jwk = JSON.stringify(newPrivateJwk());
  let listening = 0;
  for (let i = 0; i < workers; i++) cluster.fork({ PEER_JWK: jwk }).on("listening", () => ++listening === workers && console.log("ready"));
  process.on("SIGTERM", () => {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.kill("SIGTERM");
    process.exit(0);
  });
} else {
  const { default: Provider } = await import("oidc-provider");
  const jwk = process.env.PEER_JWK ? JSON.parse(process.env.PEER_JWK) : newPrivateJwk();
  createPrivateKey({ key: jwk, format: "jwk" }); // fails early on a bad key
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    jwks: { keys: [jwk] },
    ttl: { ClientCredentials: 3600 },
    clients: [
      { client_id: CLIENT_ID, client_secret: CLIENT_SECRET, grant_types: ["client_credentials"], redirect_uris: [], response_types: [], token_endpoint_auth_method: "client_secret_basic", id_token_signed_response_alg: alg },
    ],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => AUDIENCE,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({ audience: AUDIENCE, scope: "api", accessTokenTTL: 3600, accessTokenFormat: "jwt", jwt: { sign: { alg } } }),
      },
    },
  });
  // Quiet under load: no per-request error printing.
  provider.on("server_error", (_ctx, error) => console.error("peer server_error", error?.message));
  createServer(provider.callback()).listen(Number(port), "127.0.0.1", () => workers <= 1 && console.log("ready"));
}
