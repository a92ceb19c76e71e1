import type { ServiceImpl } from "@connectrpc/connect";
import type { HealthService } from "../../gen/billing/v1/health_service_pb.js";

export function healthService(): ServiceImpl<typeof HealthService> {
  return {
    ping() {
      return { ok: true };
    },
  };
}
