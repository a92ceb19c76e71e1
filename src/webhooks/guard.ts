/**
 * Which hosts webhooks may reach. By default not this service's own host (PUBLIC_BASE_URL's) and
 * no loopback, private, link-local (cloud metadata), CGNAT or unspecified address: an endpoint URL
 * must not turn the service into a way into its own network. WEBHOOK_ALLOW_PRIVATE_HOSTS=true
 * lifts the rule (a receiver on the same machine or network, tests). Checked when an endpoint is
 * saved (its literal host) and again at every connection (the address its name resolves to).
 */
import { isIP } from "node:net";

function v4(ip: string): number[] | undefined {
  const parts = ip.split(".").map(Number);
  return parts.length === 4 && parts.every((n) => Number.isInteger(n) && n >= 0 && n <= 255) ? parts : undefined;
}

/** Whether an IP address (v4 or v6) is one webhooks must not reach. */
export function isPrivateAddress(ip: string): boolean {
  const bare = ip.replace(/^\[|\]$/g, "").toLowerCase();
  const mapped = bare.match(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/);
  const p = v4(mapped ? (mapped[1] as string) : bare);
  if (p) {
    const [a = 0, b = 0] = p;
    return a === 0 || a === 10 || a === 127 || (a === 100 && b >= 64 && b <= 127) || (a === 169 && b === 254) || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || a >= 224;
  }
  if (isIP(bare) !== 6) return false;
  return bare === "::" || bare === "::1" || /^f[cd]/.test(bare) || /^fe[89ab]/.test(bare) || /^ff/.test(bare);
}

export interface HostGuard {
  /** Why `url` may not receive webhooks, judged from its literal host; undefined when it may. */
  checkUrl(url: URL): string | undefined;
  /** Whether a resolved address may be connected to. */
  allowsAddress(ip: string): boolean;
}

export function hostGuard(allowPrivate: boolean, ownHosts: () => string[]): HostGuard {
  const own = (host: string) => ownHosts().some((h) => h.toLowerCase() === host.toLowerCase());
  return {
    checkUrl(url) {
      if (allowPrivate) return undefined;
      const host = url.hostname.replace(/^\[|\]$/g, "");
      const why = "must not point at this service's own host or a private, loopback or link-local address (WEBHOOK_ALLOW_PRIVATE_HOSTS=true allows it)";
      if (own(url.host) || own(host) || host === "localhost" || host.endsWith(".localhost")) return why;
      if (isIP(host) && isPrivateAddress(host)) return why;
      return undefined;
    },
    allowsAddress(ip) {
      return allowPrivate || !isPrivateAddress(ip);
    },
  };
}
