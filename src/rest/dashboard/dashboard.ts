/** Moved to src/pages/dashboard/dashboard.ts; this module re-exports it for the importers not yet updated. */
export { type DashboardOptions, type DashboardServices, SESSION_COOKIE, createDashboard } from "../../pages/dashboard/dashboard.js";
