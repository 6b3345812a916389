/**
 * Bundled for Node by signers.test.ts and run there: the signer factory under a runtime without
 * bun:ffi. Prints one JSON line {plan, kind, verified}.
 */
import { createPublicKey, generateKeyPairSync, verify } from "node:crypto";
import type { JWK } from "jose";
import { SignerFactory } from "../../src/keys/signers/factory.ts";

const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const factory = new SignerFactory({ mode: "auto" });
const plan = await factory.plan();
const signer = await factory.create("RS256", privateKey.export({ format: "jwk" }) as JWK);
const input = new TextEncoder().encode("header.payload");
const signature = await signer.sign(input);
console.log(JSON.stringify({ plan, kind: signer.kind, verified: verify("sha256", input, createPublicKey(privateKey), signature) }));
