import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { configurationMarkdown } from "../../src/config/docs.ts";
import { ConfigError, loadConfig } from "../../src/config/load.ts";
import { isDnsName, SETTINGS } from "../../src/config/schema.ts";

const problemsOf = (env: Record<string, string>, flags: Record<string, string> = {}) => {
  try {
    loadConfig(env, flags);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
};

describe("loadConfig", () => {
  test("defaults are the contract's", () => {
    expect(loadConfig({})).toEqual({
      host: "127.0.0.1",
      port: 8080,
      publicUrl: "http://localhost:8080",
      baseDomain: "localhost:8080",
      dataDir: "./data",
      masterKey: undefined,
      masterKeyFile: undefined,
      bootstrapApiKey: undefined,
      keyRotationPeriod: 86400,
      signingAlg: "RS256",
      signer: "auto",
      logLevel: "info",
      maxBodyBytes: 65536,
      metricsHost: "127.0.0.1",
      metricsPort: undefined,
      logFile: undefined,
      logRetentionDays: 1,
      workers: process.platform === "linux" ? availableParallelism() : 1,
      credentialsDirectory: undefined,
    });
  });

  test("TOKENMINT_WORKERS: 1 to 256 processes", () => {
    expect(loadConfig({ TOKENMINT_WORKERS: "1" }).workers).toBe(1);
    expect(loadConfig({ TOKENMINT_WORKERS: "4" }).workers).toBe(4);
    for (const bad of ["0", "257", "two", "-1"]) expect(problemsOf({ TOKENMINT_WORKERS: bad })[0]).toContain("TOKENMINT_WORKERS");
  });

  test("the default public URL follows the port; flags win over variables", () => {
    expect(loadConfig({ TOKENMINT_PORT: "9000" }).publicUrl).toBe("http://localhost:9000");
    const config = loadConfig({ TOKENMINT_PORT: "9000", TOKENMINT_HOST: "0.0.0.0" }, { "--port": "9100", "--data-dir": "/srv/tm" });
    expect([config.port, config.host, config.dataDir, config.publicUrl]).toEqual([9100, "0.0.0.0", "/srv/tm", "http://localhost:9100"]);
  });

  test("a TOKENMINT_MASTER_KEY that is not 32 bytes of base64url is reported with the other problems, never echoed", () => {
    const problems = problemsOf({ TOKENMINT_MASTER_KEY: "abc-SECRET", TOKENMINT_PORT: "abc" });
    expect(problems).toHaveLength(2);
    expect(problems.join("\n")).toContain("TOKENMINT_PORT");
    expect(problems.find((p) => p.includes("TOKENMINT_MASTER_KEY"))).toMatch(/32 bytes/);
    expect(problems.join("\n")).not.toContain("SECRET");
    expect(problemsOf({ TOKENMINT_MASTER_KEY: "!!!" })[0]).toMatch(/TOKENMINT_MASTER_KEY is not valid base64url/);
  });

  test("TOKENMINT_BASE_DOMAIN is a DNS name with an optional port, never an IP address", () => {
    expect(loadConfig({ TOKENMINT_BASE_DOMAIN: "Tm.Example.com:8443" }).baseDomain).toBe("tm.example.com:8443");
    expect(loadConfig({ TOKENMINT_BASE_DOMAIN: "internal" }).baseDomain).toBe("internal");
    // The default, the public URL's host, may be an IP address: projects then cannot be created (core/projects.ts).
    expect(["http://10.0.0.5:8080", "http://[::1]:8080", "https://auth.example.com"].map((url) => isDnsName(loadConfig({ TOKENMINT_PUBLIC_URL: url }).baseDomain))).toEqual([false, false, true]);
    for (const bad of ["10.0.0.5", "10.0.0.5:8080", "tm.123", "0x7f.1", "[::1]", "a b", "tm.example.com:0", "xn--zz.example", "bücher..example", "a/b", "u@tm.example.com"]) {
      expect({ bad, problems: problemsOf({ TOKENMINT_BASE_DOMAIN: bad }) }).toEqual({ bad, problems: [expect.stringContaining("TOKENMINT_BASE_DOMAIN")] });
    }
  });

  test("TOKENMINT_BASE_DOMAIN takes the canonical form of a Host header: ASCII, no trailing dot, no default port", () => {
    expect(loadConfig({ TOKENMINT_BASE_DOMAIN: "Bücher.Example" }).baseDomain).toBe("xn--bcher-kva.example");
    expect(loadConfig({ TOKENMINT_BASE_DOMAIN: "xn--bcher-kva.example" }).baseDomain).toBe("xn--bcher-kva.example");
    expect(loadConfig({ TOKENMINT_BASE_DOMAIN: "bücher.example:8443" }).baseDomain).toBe("xn--bcher-kva.example:8443");
    expect(loadConfig({ TOKENMINT_BASE_DOMAIN: "tm.example.com." }).baseDomain).toBe("tm.example.com");
    expect(loadConfig({ TOKENMINT_BASE_DOMAIN: "tm.example.com:080" }).baseDomain).toBe("tm.example.com");
    expect(loadConfig({ TOKENMINT_BASE_DOMAIN: "tm.example.com:08443" }).baseDomain).toBe("tm.example.com:8443");
    // The default port is the public URL's scheme's.
    const https = { TOKENMINT_PUBLIC_URL: "https://auth.example.com" };
    expect(loadConfig({ ...https, TOKENMINT_BASE_DOMAIN: "tm.example.com:443" }).baseDomain).toBe("tm.example.com");
    expect(loadConfig({ ...https, TOKENMINT_BASE_DOMAIN: "tm.example.com:80" }).baseDomain).toBe("tm.example.com:80");
  });

  test("the public URL loses its trailing slash and must be plain http(s)", () => {
    expect(loadConfig({ TOKENMINT_PUBLIC_URL: "https://auth.example.com/" }).publicUrl).toBe("https://auth.example.com");
    expect(loadConfig({ TOKENMINT_PUBLIC_URL: "https://example.com/tm/" }).publicUrl).toBe("https://example.com/tm");
    for (const bad of ["example.com", "ftp://example.com", "https://example.com/?a=1", "https://u:p@example.com"]) {
      expect(problemsOf({ TOKENMINT_PUBLIC_URL: bad })[0]).toContain("TOKENMINT_PUBLIC_URL");
    }
  });

  test("each bad value is named, and all problems are reported at once", () => {
    const problems = problemsOf({
      TOKENMINT_PORT: "70000",
      TOKENMINT_SIGNING_ALG: "HS256",
      TOKENMINT_KEY_ROTATION_PERIOD: "5",
      TOKENMINT_BOOTSTRAP_API_KEY: "short",
      TOKENMINT_LOG_LEVEL: "loud",
    });
    expect(problems).toHaveLength(5);
    for (const name of ["TOKENMINT_PORT", "TOKENMINT_SIGNING_ALG", "TOKENMINT_KEY_ROTATION_PERIOD", "TOKENMINT_BOOTSTRAP_API_KEY", "TOKENMINT_LOG_LEVEL"]) {
      expect(problems.some((p) => p.includes(name))).toBe(true);
    }
  });

  test("a bootstrap API key must be random: one of a few repeated characters is refused, and never echoed", () => {
    for (const weak of ["a".repeat(32), "ab".repeat(20), "passwordpassword".repeat(3), "correcthorsebatterystaplecorrecthorse"]) {
      const problems = problemsOf({ TOKENMINT_BOOTSTRAP_API_KEY: weak });
      expect(problems).toEqual([expect.stringContaining("TOKENMINT_BOOTSTRAP_API_KEY must be a random secret")]);
      expect(problems[0]).not.toContain(weak.slice(0, 8));
    }
    // Random keys of the usual kinds pass: base64url, and hex (which has 16 characters at most).
    for (let i = 0; i < 200; i++) {
      const bytes = crypto.getRandomValues(new Uint8Array(32));
      for (const random of [`tm_${Buffer.from(bytes).toString("base64url")}`, Buffer.from(bytes).toString("hex"), Buffer.from(bytes.subarray(0, 16)).toString("hex")]) {
        expect(loadConfig({ TOKENMINT_BOOTSTRAP_API_KEY: random }).bootstrapApiKey).toBe(random);
      }
    }
  });

  test("a bootstrap API key must be what a bearer token can carry: printable ASCII, no spaces", () => {
    const ok = Buffer.from(crypto.getRandomValues(new Uint8Array(24))).toString("base64url");
    expect(loadConfig({ TOKENMINT_BOOTSTRAP_API_KEY: `${ok}~!#$%&'()*+,-./:;<=>?@[]^_\`{|}` }).bootstrapApiKey).toBe(`${ok}~!#$%&'()*+,-./:;<=>?@[]^_\`{|}`);
    for (const bad of [`${ok}é`, "é".repeat(32), `${ok} x`, `${ok}\tx`, `${ok}\u00a0`, `${ok}\u007f`, `${ok}\u2028`]) {
      const problems = problemsOf({ TOKENMINT_BOOTSTRAP_API_KEY: bad });
      expect(problems).toEqual([expect.stringContaining("TOKENMINT_BOOTSTRAP_API_KEY must be printable ASCII")]);
      // The value itself is never echoed.
      expect(problems[0]).not.toContain(ok);
    }
  });

  test("ports and periods accept only whole numbers in range", () => {
    for (const port of ["0", "65536", "abc", "80.5", "-1", ""]) expect(problemsOf({ TOKENMINT_PORT: port })).toHaveLength(1);
    expect(loadConfig({ TOKENMINT_PORT: "65535" }).port).toBe(65535);
    expect(loadConfig({ TOKENMINT_KEY_ROTATION_PERIOD: "0" }).keyRotationPeriod).toBe(0);
    expect(loadConfig({ TOKENMINT_KEY_ROTATION_PERIOD: "60" }).keyRotationPeriod).toBe(60);
    expect(problemsOf({ TOKENMINT_KEY_ROTATION_PERIOD: "59" })).toHaveLength(1);
  });

  test("TOKENMINT_LOG_FILE names a file: a path ending in a directory is refused", () => {
    expect(loadConfig({ TOKENMINT_LOG_FILE: " /var/log/tokenmint/tokenmint.log " }).logFile).toBe("/var/log/tokenmint/tokenmint.log");
    expect(loadConfig({ TOKENMINT_LOG_FILE: "logs/.tokenmint" }).logFile).toBe("logs/.tokenmint");
    expect(loadConfig({ TOKENMINT_LOG_FILE: "" }).logFile).toBeUndefined();
    for (const path of ["/var/log/tokenmint/", "/var/log/tokenmint/.", "logs/..", ".", ".."]) {
      expect({ path, problems: problemsOf({ TOKENMINT_LOG_FILE: path }) }).toEqual({
        path,
        problems: [`TOKENMINT_LOG_FILE must name a file, like /var/log/tokenmint/tokenmint.log, not a directory (${path})`],
      });
    }
  });

  test("log retention is 1 to 30 days; the metrics port must not clash with the API port", () => {
    expect(loadConfig({ TOKENMINT_LOG_RETENTION_DAYS: "30" }).logRetentionDays).toBe(30);
    expect(problemsOf({ TOKENMINT_LOG_RETENTION_DAYS: "31" })[0]).toContain("TOKENMINT_LOG_RETENTION_DAYS");
    expect(problemsOf({ TOKENMINT_LOG_RETENTION_DAYS: "0" })).toHaveLength(1);
    expect(loadConfig({ TOKENMINT_METRICS_PORT: "9464" }).metricsPort).toBe(9464);
    expect(problemsOf({ TOKENMINT_METRICS_PORT: "8080" })[0]).toContain("must differ");
  });

  test("a master key or key file set but empty is an error, never 'generate one'", () => {
    for (const name of ["TOKENMINT_MASTER_KEY", "TOKENMINT_MASTER_KEY_FILE"]) {
      for (const empty of ["", "  "]) {
        const problems = problemsOf({ [name]: empty });
        expect(problems).toHaveLength(1);
        expect(problems[0]).toContain(`${name} is set but empty`);
      }
    }
  });

  test("every algorithm of the contract is accepted", () => {
    for (const alg of ["RS256", "ES256", "EdDSA"]) expect(loadConfig({ TOKENMINT_SIGNING_ALG: alg }).signingAlg).toBe(alg as never);
  });

  test("CREDENTIALS_DIRECTORY is read for the master key lookup", () => {
    expect(loadConfig({ CREDENTIALS_DIRECTORY: "/run/credentials/tokenmint.service" }).credentialsDirectory).toBe("/run/credentials/tokenmint.service");
  });
});

describe("docs/configuration.md", () => {
  test("is generated from the settings table (run `npm run docs` after changing it)", () => {
    const committed = readFileSync(join(import.meta.dir, "..", "..", "docs", "configuration.md"), "utf8");
    expect(committed).toBe(configurationMarkdown());
    for (const setting of SETTINGS) expect(committed).toContain(`\`${setting.env}\``);
  });
});
