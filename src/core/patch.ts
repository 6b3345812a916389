/**
 * @module core/patch
 * A `PATCH` body sets only the fields it carries; one that carries none changes nothing, so it
 * writes nothing and answers the resource as it is (`updatedAt` kept).
 */

/** Whether a patch sets no field. */
export const isEmptyPatch = (patch: object): boolean => Object.values(patch).every((value) => value === undefined);
