/**
 * Release artifacts: one executable per Linux target and a SHA256SUMS file.
 *
 *   bun scripts/release.ts [--out dist/release]
 *
 * The host build uses the installed packages. For the other target, the platform packages it
 * needs (Bun's runtime and the native addons for that CPU) come from the npm registry with
 * `npm pack` and are unpacked next to the installed ones (npm never installs packages for another
 * CPU). Nothing is downloaded from anywhere else. When `qemu-aarch64` and Debian's arm64 cross
 * libraries are present, the arm64 binary is also run once (`--version`) as a check.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { parseArgs } from "node:util";

const root = resolve(import.meta.dir, "..");
const { values } = parseArgs({ options: { out: { type: "string", default: join(root, "dist", "release") } }, strict: true });
const out = resolve(values.out as string);

interface Target {
  name: string;
  bunTarget?: string;
  /** Platform packages that must sit in node_modules for this target, with their versions. */
  packages: Record<string, string>;
}

const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as { packages: Record<string, { version?: string }> };
const versionOf = (name: string) => {
  const direct = lock.packages[`node_modules/${name}`]?.version;
  if (direct === undefined) throw new Error(`${name} is not in package-lock.json`);
  return direct;
};

const targets: Target[] = [
  { name: "linux-x64", packages: {} },
  {
    name: "linux-arm64",
    bunTarget: "bun-linux-arm64",
    packages: {
      "@oven/bun-linux-aarch64": versionOf("bun"),
      "@lmdb/lmdb-linux-arm64": versionOf("lmdb"),
      "@msgpackr-extract/msgpackr-extract-linux-arm64": versionOf("msgpackr-extract"),
    },
  },
];

function run(cmd: string[], cwd = root): string {
  const result = Bun.spawnSync(cmd, { cwd, stdout: "pipe", stderr: "pipe" });
  if (result.exitCode !== 0) throw new Error(`${cmd.join(" ")} failed: ${result.stderr.toString().trim()}`);
  return result.stdout.toString();
}

/** Unpacks `name@version` from the registry into node_modules/name unless it is there already. */
function ensurePackage(name: string, version: string): void {
  const dir = join(root, "node_modules", name);
  const manifest = join(dir, "package.json");
  if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, "utf8")) as { version: string }).version === version) return;
  const tmp = mkdtempSync(join(tmpdir(), "tokenmint-pack-"));
  try {
    const file = run(["npm", "pack", "--silent", `${name}@${version}`], tmp).trim().split("\n").pop() as string;
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    run(["tar", "-xzf", join(tmp, basename(file)), "-C", dir, "--strip-components=1"]);
    console.log(`unpacked ${name}@${version}`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

mkdirSync(out, { recursive: true });
const sums: string[] = [];
for (const target of targets) {
  for (const [name, version] of Object.entries(target.packages)) ensurePackage(name, version);
  const outfile = join(out, `tokenmint-${target.name}`);
  run(["bun", join(root, "scripts", "build.ts"), "--outfile", outfile, ...(target.bunTarget ? ["--target", target.bunTarget] : [])]);
  const digest = createHash("sha256").update(readFileSync(outfile)).digest("hex");
  sums.push(`${digest}  ${basename(outfile)}`);
  console.log(`built ${outfile}`);
}
writeFileSync(join(out, "SHA256SUMS"), `${sums.join("\n")}\n`);
console.log(`wrote ${join(out, "SHA256SUMS")}`);

const sysroot = "/usr/aarch64-linux-gnu";
if (Bun.which("qemu-aarch64") !== null && existsSync(join(sysroot, "lib", "libstdc++.so.6"))) {
  const version = run(["qemu-aarch64", "-L", sysroot, join(out, "tokenmint-linux-arm64"), "--version"]).trim();
  console.log(`linux-arm64 under qemu: ${version}`);
}
