/** Moved to src/pages/hosted/portal.ts; this module re-exports it for the importers not yet updated. */
export { createPortalPages } from "../pages/hosted/portal.js";
