/** Moved to src/pages/docs.ts; this module re-exports it for the importers not yet updated. */
export { OPENAPI_URL, createApiDocs, loadOpenApi, renderDocs } from "../pages/docs.js";
