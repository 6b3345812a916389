/** @module cli/help — the text of `tokenmint --help` and `tokenmint <command> --help`. */
import { SETTINGS } from "../config/schema.ts";

const SETTINGS_HELP = SETTINGS.map((s) => `  ${s.env.padEnd(32)}${s.flag ? `${s.flag.padEnd(14)}` : "".padEnd(14)}${s.description}`).join("\n");

export const HELP: Readonly<Record<string, string>> = {
  main: `tokenmint: issues signed JWT access tokens for machine-to-machine use.

Usage: tokenmint <command> [options]

Commands:
  serve                       Start the HTTP service
  apikeys create --name NAME [--expires-in SECONDS]
                              Create a management API key (printed once)
  apikeys list                List API keys (never their secrets)
  apikeys revoke ID           Revoke an API key
  keys list                   List signing keys (public metadata)
  keys rotate                 Promote the next signing key now
  keys revoke KID             Revoke a signing key: it leaves the JWKS at once

Options:
  --json                      Machine-readable output (apikeys, keys)
  --help, -h                  Help for a command: tokenmint <command> --help
  --version, -v               Print version and commit

Settings (environment variable, flag, meaning):
${SETTINGS_HELP}

Commands work on the data directory while the server runs; the server sees their changes
within a second. Exit code 0 on success, 1 on failure, 2 on a usage error.`,
  serve: `Usage: tokenmint serve [--host HOST] [--port PORT] [--public-url URL] [--data-dir DIR]

Starts the HTTP service: the management API under /v1 and the public discovery endpoints
/.well-known/openid-configuration and /.well-known/jwks. Logs are JSON lines on stdout.
SIGTERM or SIGINT stops accepting, finishes in-flight requests, closes the store and exits 0.

Settings:
${SETTINGS_HELP}`,
  apikeys: `Usage:
  tokenmint apikeys create --name NAME [--expires-in SECONDS] [--json]
  tokenmint apikeys list [--json]
  tokenmint apikeys revoke ID [--json]

Management API keys authenticate /v1 calls as 'Authorization: Bearer <key>'. The key is printed
once by 'create' (alone on stdout, so KEY=$(tokenmint apikeys create --name ci) works); only its
SHA-256 hash is stored. Takes --data-dir like serve.`,
  keys: `Usage:
  tokenmint keys list [--json]
  tokenmint keys rotate [--json]
  tokenmint keys revoke KID [--json]

Signing keys move next -> current -> retired -> removed. 'rotate' promotes the next key (it must
have been published for the JWKS max-age first); 'revoke' removes a key from the JWKS at once.
No command ever prints private key material. Takes --data-dir like serve.`,
};
