/**
 * @module config/schema
 * Every setting of the service in one table: environment variable, flag, default and meaning.
 * docs/configuration.md is generated from this table (scripts/gen-docs.ts) and a test keeps them equal.
 */
import { availableParallelism } from "node:os";
import { domainToASCII } from "node:url";
import { decodeMasterKey } from "../keys/master-key.ts";

/** A signing algorithm the service can generate keys for. */
export type SigningAlg = "RS256" | "ES256" | "EdDSA";
export const SIGNING_ALGS: readonly SigningAlg[] = ["RS256", "ES256", "EdDSA"];

/** Which signing code to use: the fastest available, or the runtime's own only. */
export type SignerMode = "auto" | "builtin";
export const SIGNER_MODES: readonly SignerMode[] = ["auto", "builtin"];

/** Log levels, most verbose first. */
export type LogLevel = "debug" | "info" | "warn" | "error";
export const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

/** The resolved settings of one process. */
export interface Config {
  host: string;
  port: number;
  publicUrl: string;
  baseDomain: string;
  dataDir: string;
  masterKey: string | undefined;
  masterKeyFile: string | undefined;
  bootstrapApiKey: string | undefined;
  keyRotationPeriod: number;
  signingAlg: SigningAlg;
  signer: SignerMode;
  logLevel: LogLevel;
  maxBodyBytes: number;
  metricsHost: string;
  metricsPort: number | undefined;
  logFile: string | undefined;
  logRetentionDays: number;
  /** Worker processes of `serve` (1 = one process, no workers). */
  workers: number;
  /** systemd's credentials directory (`$CREDENTIALS_DIRECTORY`), if the service runs under systemd. */
  credentialsDirectory: string | undefined;
}

/** One row of the settings table. `parse` returns the value or a problem description. */
export interface Setting<K extends Exclude<keyof Config, "credentialsDirectory"> = Exclude<keyof Config, "credentialsDirectory">> {
  key: K;
  env: string;
  flag?: string;
  /** Human-readable default for the docs. */
  defaultText: string;
  description: string;
  parse(raw: string | undefined, partial: Partial<Config>): Config[K] | { problem: string };
}

const problem = (text: string) => ({ problem: text });

/**
 * Whether a bootstrap API key looks like a word or a pattern rather than a random secret: fewer
 * than 8 different characters, or a quarter or more of its three-character runs repeated. No
 * random key of 32 hex or base64url characters was refused in 200,000 tries each (32 random
 * digits: about 1 in 800); "aaaa…", "abab…" and repeated words are.
 */
export function looksGuessable(key: string): boolean {
  if (new Set(key).size < 8) return true;
  const runs = new Set<string>();
  for (let i = 0; i + 3 <= key.length; i++) runs.add(key.slice(i, i + 3));
  return runs.size < 0.75 * (key.length - 2);
}

function integerIn(name: string, raw: string, min: number, max: number): number | { problem: string } {
  if (!/^\d+$/.test(raw.trim())) return problem(`${name} must be a whole number from ${min} to ${max}, got '${raw}'`);
  const value = Number(raw.trim());
  if (value < min || value > max) return problem(`${name} must be from ${min} to ${max}, got ${value}`);
  return value;
}

/** A DNS host name (letters, digits, hyphens; dot-separated labels) with an optional `:port`. */
export function isHostName(value: string): boolean {
  const match = /^([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*)(?::(\d{1,5}))?$/.exec(value);
  if (match === null || (match[1] as string).length > 253) return false;
  if (match[2] !== undefined && !(Number(match[2]) >= 1 && Number(match[2]) <= 65535)) return false;
  // What these rules pass but a URL refuses (an `xn--` label that is no valid IDNA name) is no host name either.
  return URL.canParse(`http://${value}`);
}

/**
 * An internationalized host name in the ASCII form Host headers carry (IDNA: `bücher.example` is
 * `xn--bcher-kva.example`), the port kept; a name without a valid ASCII form as it was (and
 * refused by isHostName after).
 */
function asciiHost(host: string): string {
  if (!/[^\x00-\x7f]/.test(host)) return host;
  const [, name = "", port = ""] = /^(.*?)(:\d+)?$/.exec(host) ?? [];
  const ascii = domainToASCII(name);
  return ascii === "" ? host : `${ascii}${port}`;
}

/**
 * A host name with an optional port in the canonical form a request's Host is matched against and
 * URLs are built from (lowercase, ASCII, without a trailing dot, without `protocol`'s default
 * port, the port without leading zeros), or undefined when it is no host name.
 */
export function canonicalHost(raw: string, protocol: string): string | undefined {
  const host = asciiHost(raw.trim().toLowerCase()).replace(/\.(?=:\d+$|$)/, "");
  return isHostName(host) ? new URL(`${protocol}//${host}`).host : undefined;
}

/**
 * Whether a host (with an optional port) is a DNS name, under which `<slug>.<name>` is a host
 * too: not a bracketed IPv6 address, and its last label is not a number (URL parsers read such a
 * host as an IPv4 address).
 */
export function isDnsName(host: string): boolean {
  if (host.startsWith("[")) return false;
  const name = host.replace(/:\d+$/, "");
  return !/^(?:\d+|0x[0-9a-f]*)$/i.test(name.slice(name.lastIndexOf(".") + 1));
}

function oneOf<T extends string>(name: string, allowed: readonly T[], raw: string): T | { problem: string } {
  return allowed.find((value) => value === raw) ?? problem(`${name} must be one of ${allowed.join(", ")}, got '${raw}'`);
}

/** One worker per core where processes can share a port (Linux); one process elsewhere. */
const defaultWorkers = () => (process.platform === "linux" ? availableParallelism() : 1);

/** The settings, in the order they are resolved (later rows may read earlier ones). */
export const SETTINGS: readonly Setting[] = [
  {
    key: "host",
    env: "TOKENMINT_HOST",
    flag: "--host",
    defaultText: "`127.0.0.1`",
    description: "Address the HTTP listener binds to.",
    parse: (raw) => (raw === undefined ? "127.0.0.1" : raw.trim() === "" ? problem("TOKENMINT_HOST must not be empty") : raw.trim()),
  },
  {
    key: "port",
    env: "TOKENMINT_PORT",
    flag: "--port",
    defaultText: "`8080`",
    description: "TCP port of the HTTP listener (1-65535).",
    parse: (raw) => (raw === undefined ? 8080 : integerIn("TOKENMINT_PORT", raw, 1, 65535)),
  },
  {
    key: "publicUrl",
    env: "TOKENMINT_PUBLIC_URL",
    flag: "--public-url",
    defaultText: "`http://localhost:<port>`",
    description: "Public URL of the default project: the `iss` of its tokens and the base of its discovery URLs.",
    parse: (raw, partial) => {
      if (raw === undefined) return `http://localhost:${partial.port ?? 8080}`;
      let url: URL;
      try {
        url = new URL(raw.trim());
      } catch {
        return problem(`TOKENMINT_PUBLIC_URL must be an absolute http(s) URL, got '${raw}'`);
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") return problem("TOKENMINT_PUBLIC_URL must use http or https");
      if (url.search || url.hash || url.username || url.password) {
        return problem("TOKENMINT_PUBLIC_URL must not carry a query, fragment or credentials");
      }
      return url.href.replace(/\/+$/, "");
    },
  },
  {
    key: "baseDomain",
    env: "TOKENMINT_BASE_DOMAIN",
    flag: "--base-domain",
    defaultText: "the host (and port) of TOKENMINT_PUBLIC_URL",
    description:
      "Domain under which every project has its own host, `<slug>.<base domain>` (with TOKENMINT_PUBLIC_URL's scheme): its issuer, discovery, JWKS and OAuth endpoints. May carry a port; an internationalized name is taken in its ASCII (`xn--`) form. Must be a DNS name, not an IP address (where TOKENMINT_PUBLIC_URL's host is one, set this to create projects). The default project stays at TOKENMINT_PUBLIC_URL.",
    parse: (raw, partial) => {
      if (raw === undefined || raw.trim() === "") return new URL(partial.publicUrl ?? "http://localhost:8080").host;
      const value = canonicalHost(raw, new URL(partial.publicUrl ?? "http://localhost:8080").protocol);
      if (value === undefined) return problem(`TOKENMINT_BASE_DOMAIN must be a host name with an optional port, got '${raw}'`);
      return isDnsName(value) ? value : problem(`TOKENMINT_BASE_DOMAIN must be a DNS name, not an IP address (projects live at <slug>.<base domain>), got '${raw}'`);
    },
  },
  {
    key: "dataDir",
    env: "TOKENMINT_DATA_DIR",
    flag: "--data-dir",
    defaultText: "`./data`",
    description: "Directory of the data file (`tokenmint.mdb`) and, by default, the generated master key.",
    parse: (raw) => (raw === undefined ? "./data" : raw.trim() === "" ? problem("TOKENMINT_DATA_DIR must not be empty") : raw.trim()),
  },
  {
    key: "masterKey",
    env: "TOKENMINT_MASTER_KEY",
    defaultText: "none",
    description:
      "Master key (base64url of 32 bytes) that encrypts signing keys at rest. Takes precedence over TOKENMINT_MASTER_KEY_FILE. Set but empty is an error (an unfilled secret must not mean 'generate one').",
    parse: (raw) => {
      if (raw === undefined) return undefined;
      if (raw.trim() === "") return problem("TOKENMINT_MASTER_KEY is set but empty; unset it or give the key");
      try {
        decodeMasterKey(raw, "TOKENMINT_MASTER_KEY");
      } catch (error) {
        // The message names the setting and the length, never the value.
        return problem((error as Error).message.replace(/^the master key from (TOKENMINT_MASTER_KEY)/, "$1"));
      }
      return raw.trim();
    },
  },
  {
    key: "masterKeyFile",
    env: "TOKENMINT_MASTER_KEY_FILE",
    defaultText: "`$CREDENTIALS_DIRECTORY/master-key` if present, else `<data-dir>/master.key`",
    description:
      "File holding the master key. If no master key is set and the data holds no keys yet, one is generated at `<data-dir>/master.key` (mode 0600) with a warning. Set but empty is an error.",
    parse: (raw) => (raw === undefined ? undefined : raw.trim() === "" ? problem("TOKENMINT_MASTER_KEY_FILE is set but empty; unset it or give the file") : raw.trim()),
  },
  {
    key: "bootstrapApiKey",
    env: "TOKENMINT_BOOTSTRAP_API_KEY",
    defaultText: "none",
    description:
      "Management API key (a random secret of at least 32 printable ASCII characters, no spaces, such as `tm_$(openssl rand 32 | basenc --base64url | tr -d =)`) registered for the default project at start-up if not yet known. Stored as a SHA-256 hash, as every API key, which protects only a random one. It stays registered once the setting is removed: revoke it with `apikeys revoke`.",
    parse: (raw) => {
      if (raw === undefined || raw === "") return undefined;
      if (raw.length < 32) return problem("TOKENMINT_BOOTSTRAP_API_KEY must be at least 32 characters long");
      // What a bearer token can carry (core/api-keys.ts authenticate): a key with any other
      // character would be registered but refused in every request.
      if (!/^[\x21-\x7e]+$/.test(raw)) return problem("TOKENMINT_BOOTSTRAP_API_KEY must be printable ASCII without spaces (what an 'Authorization: Bearer' header carries)");
      // Stored as a fast hash (core/secret-hash.ts), as every API key: only a random key resists
      // guessing from a copy of the data.
      if (looksGuessable(raw)) {
        return problem(`TOKENMINT_BOOTSTRAP_API_KEY must be a random secret, and this one has few different characters or repeats itself, as a word or a pattern does; make one with: echo tm_$(openssl rand 32 | basenc --base64url | tr -d =)`);
      }
      return raw;
    },
  },
  {
    key: "keyRotationPeriod",
    env: "TOKENMINT_KEY_ROTATION_PERIOD",
    defaultText: "`86400`",
    description: "Seconds between automatic signing-key rotations: `0` turns automatic rotation off, otherwise 60 to 31536000 (a year).",
    parse: (raw) => {
      if (raw === undefined) return 86400;
      const value = integerIn("TOKENMINT_KEY_ROTATION_PERIOD", raw, 0, 31_536_000);
      if (typeof value === "number" && value > 0 && value < 60) {
        return problem("TOKENMINT_KEY_ROTATION_PERIOD must be 0 (off) or at least 60 seconds");
      }
      return value;
    },
  },
  {
    key: "signingAlg",
    env: "TOKENMINT_SIGNING_ALG",
    defaultText: "`RS256`",
    description: "Algorithm of newly generated signing keys: `RS256` (RSA 2048), `ES256` (P-256) or `EdDSA` (Ed25519).",
    parse: (raw) => (raw === undefined ? "RS256" : oneOf("TOKENMINT_SIGNING_ALG", SIGNING_ALGS, raw.trim())),
  },
  {
    key: "signer",
    env: "TOKENMINT_SIGNER",
    defaultText: "`auto`",
    description:
      "Signing code: `auto` signs RS256 with the system's OpenSSL (`libcrypto.so.3`; up to twice as fast, depending on the CPU) when it loads and agrees with the built-in signer, else with the runtime's own crypto; `builtin` always uses the runtime's own. `serve` logs the choice at start-up.",
    parse: (raw) => (raw === undefined ? "auto" : oneOf("TOKENMINT_SIGNER", SIGNER_MODES, raw.trim().toLowerCase())),
  },
  {
    key: "logLevel",
    env: "TOKENMINT_LOG_LEVEL",
    defaultText: "`info`",
    description: "Least severe level written: `debug` (adds the settings at start, each catch-up with another process's writes, and the signers line of CLI commands), `info`, `warn` or `error`.",
    parse: (raw) => (raw === undefined ? "info" : oneOf("TOKENMINT_LOG_LEVEL", LOG_LEVELS, raw.trim().toLowerCase())),
  },
  {
    key: "maxBodyBytes",
    env: "TOKENMINT_MAX_BODY_BYTES",
    defaultText: "`65536`",
    description: "Largest accepted request body in bytes, 1024 to 10485760 (10 MiB); larger bodies get `413 payload_too_large`.",
    parse: (raw) => (raw === undefined ? 65536 : integerIn("TOKENMINT_MAX_BODY_BYTES", raw, 1024, 10_485_760)),
  },
  {
    key: "metricsHost",
    env: "TOKENMINT_METRICS_HOST",
    defaultText: "`127.0.0.1`",
    description: "Address of the Prometheus metrics listener (only used with TOKENMINT_METRICS_PORT). Keep it private: the listener has no authentication.",
    parse: (raw) => (raw === undefined ? "127.0.0.1" : raw.trim() === "" ? problem("TOKENMINT_METRICS_HOST must not be empty") : raw.trim()),
  },
  {
    key: "metricsPort",
    env: "TOKENMINT_METRICS_PORT",
    defaultText: "off",
    description:
      "Port of a separate listener (`serve` only) answering `GET /metrics` in the Prometheus text format 0.0.4, 405 to another method on that path and 404 to any other path; unset means no metrics listener. Must differ from TOKENMINT_PORT.",
    parse: (raw, partial) => {
      if (raw === undefined || raw === "") return undefined;
      const value = integerIn("TOKENMINT_METRICS_PORT", raw, 1, 65535);
      if (value === partial.port) return problem("TOKENMINT_METRICS_PORT must differ from TOKENMINT_PORT");
      return value;
    },
  },
  {
    key: "logFile",
    env: "TOKENMINT_LOG_FILE",
    defaultText: "none (stdout)",
    description:
      "`serve` writes its log lines to daily files instead of stdout: `/var/log/tokenmint/tokenmint.log` writes `tokenmint-YYYY-MM-DD.log` (the UTC date of each line; a new file at midnight UTC) in that directory, created 0750 if missing; files are created 0640. A path ending in `/` or naming a directory is refused. CLI commands keep writing warnings to stderr.",
    parse: (raw) => {
      if (raw === undefined || raw.trim() === "") return undefined;
      const path = raw.trim();
      // `/var/log/tokenmint/` would otherwise write `/var/log/tokenmint-<date>`, outside the directory.
      if (/(?:^|\/)\.{0,2}$/.test(path)) return problem(`TOKENMINT_LOG_FILE must name a file, like /var/log/tokenmint/tokenmint.log, not a directory (${path})`);
      return path;
    },
  },
  {
    key: "logRetentionDays",
    env: "TOKENMINT_LOG_RETENTION_DAYS",
    defaultText: "`1`",
    description:
      "Days daily log files are kept (1-30). At start-up and hourly `serve` deletes the files named exactly `<name>-YYYY-MM-DD<ext>` whose date is more than this many days before today (UTC): today's file and the N previous days' files stay. No other file is touched.",
    parse: (raw) => (raw === undefined ? 1 : integerIn("TOKENMINT_LOG_RETENTION_DAYS", raw, 1, 30)),
  },
  {
    key: "workers",
    env: "TOKENMINT_WORKERS",
    defaultText: "the number of CPU cores (Linux); `1` elsewhere",
    description:
      "Processes `serve` runs (1-256). With more than one, a primary process holds the data directory and starts that many workers, all serving the one port (SO_REUSEPORT, Linux only) from the one data file; it restarts a worker that dies and serves the metrics of all of them. `1` serves from a single process.",
    parse: (raw) => (raw === undefined ? defaultWorkers() : integerIn("TOKENMINT_WORKERS", raw, 1, 256)),
  },
];
