/**
 * Installs and runs the benchmark's peer, panva's oidc-provider (scripts/bench/peer.mjs), under
 * Node. It goes into a fresh temp directory with npm at bench time and is removed afterwards:
 * never part of the repository or of package.json.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The peer's client, as peer.mjs registers it. */
export const PEER_CLIENT = { id: "bench", secret: "bench-secret-bench-secret-bench-secret", audience: "https://bench.example" };

export interface PeerInstall {
  dir: string;
  version: string;
  remove(): void;
}

/** `npm install oidc-provider@version` into a temp directory; throws with npm's output on failure. */
export function installPeer(version: string): PeerInstall {
  if (Bun.which("node") === null || Bun.which("npm") === null) throw new Error("the peer needs node and npm on PATH");
  const dir = mkdtempSync(join(tmpdir(), "tokenmint-peer-"));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  writeFileSync(join(dir, "package.json"), `${JSON.stringify({ private: true, type: "module" })}\n`);
  const npm = Bun.spawnSync(["npm", "install", "--no-save", "--no-package-lock", "--no-audit", "--no-fund", "--loglevel=error", `oidc-provider@${version}`], {
    cwd: dir,
    stdout: "pipe",
    stderr: "pipe",
  });
  if (npm.exitCode !== 0) {
    remove();
    throw new Error(`npm install oidc-provider@${version} failed: ${npm.stderr.toString().trim()}`);
  }
  copyFileSync(join(import.meta.dir, "peer.mjs"), join(dir, "peer.mjs"));
  const installed = (JSON.parse(readFileSync(join(dir, "node_modules", "oidc-provider", "package.json"), "utf8")) as { version: string }).version;
  return { dir, version: installed, remove };
}

/**
 * Starts the peer for `alg` with `workers` Node processes on `port`; resolves once it listens.
 * Its warnings go to peer.log in the install directory, not to the bench's output.
 */
export async function startPeer(install: PeerInstall, port: number, alg: string, workers: number) {
  const log = join(install.dir, "peer.log");
  const proc = Bun.spawn(["node", join(install.dir, "peer.mjs"), String(port), alg, String(workers)], {
    cwd: install.dir,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", NODE_ENV: "production" },
    stdin: "ignore",
    stdout: "pipe",
    stderr: Bun.file(log),
  });
  const reader = proc.stdout.getReader();
  let text = "";
  const deadline = Date.now() + 30_000;
  while (!text.includes("ready")) {
    if (Date.now() > deadline) throw new Error("the peer did not start within 30 s");
    const { value, done } = await reader.read();
    if (done) throw new Error(`the peer exited: ${readFileSync(log, "utf8").trim()}`);
    text += new TextDecoder().decode(value);
  }
  // Keep draining stdout so the peer never blocks on a full pipe.
  void (async () => {
    while (!(await reader.read()).done);
  })();
  return proc;
}
