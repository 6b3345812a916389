/** @module version — the build's version and commit, set by scripts/build.ts (`dev` from source). */
declare const TOKENMINT_VERSION: string | undefined;
declare const TOKENMINT_COMMIT: string | undefined;

export const VERSION: string = typeof TOKENMINT_VERSION === "string" ? TOKENMINT_VERSION : "dev";
export const COMMIT: string = typeof TOKENMINT_COMMIT === "string" ? TOKENMINT_COMMIT : "unknown";
