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
  projects create --slug SLUG [--name NAME] [--signing-alg ALG] [--key-rotation-period S]
                  [--default-token-lifetime S] [--custom-domain HOST]
                              Create a project, served at <slug>.<base domain>
  projects list               List the projects with their issuers
  keys list                   List signing keys (public metadata)
  keys rotate                 Promote the next signing key now
  keys revoke KID             Revoke a signing key: it leaves the JWKS at once
  backup FILE                 Copy the data to FILE, safe while the server runs
  restore FILE                Replace the data with a backup (server stopped)
  check                       Verify settings, data and master key; show the keys

Options:
  --project SLUG|ID           The project apikeys and keys act on (default: the default project)
  --json                      Machine-readable output (every command but serve)
  --help, -h                  Help for a command: tokenmint <command> --help
  --version, -v               Print version and commit

Settings (environment variable, flag, meaning):
${SETTINGS_HELP}

Commands work on the data directory while the server runs (restore excepted); the server sees
their changes from its next request on. A backup holds signing keys sealed under the master key but never
the master key itself: keep the master key separately. Exit code 0 on success, 1 on failure (one
line on stderr), 2 on a usage error.`,
  serve: `Usage: tokenmint serve [--host HOST] [--port PORT] [--public-url URL] [--base-domain DOMAIN] [--data-dir DIR]

Starts the HTTP service: the management API under /v1 and the public discovery endpoints
/.well-known/openid-configuration and /.well-known/jwks. Logs are JSON lines on stdout.
SIGTERM, SIGINT or SIGHUP stops accepting, finishes in-flight requests, closes the store and exits 0.
With TOKENMINT_WORKERS above 1 (the default: one per CPU core) a primary process runs that many
workers on the one port and passes the signal on to them.

Settings:
${SETTINGS_HELP}`,
  apikeys: `Usage:
  tokenmint apikeys create --name NAME [--expires-in SECONDS] [--json]
  tokenmint apikeys list [--json]
  tokenmint apikeys revoke ID [--json]
  (each with --project SLUG|ID for a project other than the default one)

Management API keys authenticate /v1 calls as 'Authorization: Bearer <key>'. The key is printed
once by 'create' (alone on stdout, so KEY=$(tokenmint apikeys create --name ci) works); only its
SHA-256 hash is stored. Takes --data-dir like serve.`,
  projects: `Usage:
  tokenmint projects create --slug SLUG [--name NAME] [--signing-alg RS256|ES256|EdDSA]
        [--key-rotation-period SECONDS] [--default-token-lifetime SECONDS]
        [--custom-domain HOST] [--json]
  tokenmint projects list [--json]

One instance serves many projects, each with its own signing keys, API keys, providers, clients
and issuer. The default project lives at TOKENMINT_PUBLIC_URL; every other project at
<scheme>://<slug>.<base domain> (TOKENMINT_BASE_DOMAIN), and also at its custom domain if set.
Discovery, JWKS and /oauth/ requests are routed by their Host header. Settings left out follow
the instance's TOKENMINT_SIGNING_ALG and TOKENMINT_KEY_ROTATION_PERIOD (token lifetime: 3600).
Create the project's first API key with 'tokenmint apikeys create --project SLUG --name NAME';
that key manages the project through /v1 (GET/PATCH /v1/project changes its settings).
A running server serves a new project from its next request on. Takes --data-dir like serve.`,
  keys: `Usage:
  tokenmint keys list [--json]
  tokenmint keys rotate [--json]
  tokenmint keys revoke KID [--json]
  (each with --project SLUG|ID for a project other than the default one)

Signing keys move next -> current -> retired -> removed. 'rotate' promotes the next key (it must
have been published for the JWKS max-age first); 'revoke' removes a key from the JWKS at once.
The rotation period, max-age and algorithm are those of the last server to start on the data,
not this command's settings. No command ever prints private key material. Takes --data-dir like
serve.`,
  backup: `Usage: tokenmint backup FILE [--data-dir DIR] [--json]

Writes a consistent copy of the data (tokenmint.mdb) to FILE, a new file (mode 0600); an existing
FILE is never overwritten. Safe while the server runs: the copy is one snapshot, and backup
changes nothing in the data and never rotates keys.

The copy holds the signing keys sealed (encrypted) under the master key, not the master key
itself. Keep the master key separately (TOKENMINT_MASTER_KEY, TOKENMINT_MASTER_KEY_FILE or a
systemd credential): without it a backup cannot be restored, and with it anyone holding the
backup can sign tokens.

Prints 'Backed up DIR to FILE (N bytes)', or {"file", "bytes"} with --json.`,
  restore: `Usage: tokenmint restore FILE [--data-dir DIR] [--json]

Replaces the data directory's tokenmint.mdb with the backup FILE. Stop the server first (and
run no other command on the directory meanwhile): restore refuses while a server serves it.
It also refuses when FILE is not a tokenmint backup of a data format it reads, or when the configured
master key does not open its signing keys. A refusal changes nothing.

The data comes back as it was at the backup, but no revocation is undone and no signing key in
use is dropped: each project keeps the key set of the data replaced where it is newer than the
backup's, and API keys, tokens and clients' tokens revoked since stay revoked (stderr says what
was kept). When that data cannot be read, the backup is taken as it is (stderr says so).
Clients, secrets and API keys deleted since come back.

The backup is copied into the data directory under a temporary name, checked, flushed to disk
and renamed over tokenmint.mdb, so a crash leaves either the old data or the restored data.
Prints the restored file and its size, or {"file", "dataFile", "bytes", "kept": {"signingKeys",
"revocations"}} with --json (and "replacedUnread", why the replaced data could not be read).`,
  check: `Usage: tokenmint check [--data-dir DIR] [--json]

Checks, without writing anything, what 'serve' needs: the settings are valid, the data
directory holds data of a format this build reads, and the master key opens every sealed
private key (those of the current and next keys, and of retired keys in data of format 1).
Then shows the default project's keys: the current kid and algorithm, the next key and the
next rotation. Exit code 0 when all is well; 1 with one line on stderr otherwise
(for example 'no data yet in DIR', or a master key that does not match).

Settings:
${SETTINGS_HELP}`,
};
