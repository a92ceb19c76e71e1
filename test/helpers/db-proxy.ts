/**
 * A database outage without touching the shared database server: a TCP proxy in front of it
 * that can freeze (accept, forward nothing), thaw, and shut (cut everything, refuse).
 */
import net, { type Socket } from "node:net";

/** A TCP proxy to MariaDB that can freeze (accept, forward nothing) and be shut (cut everything, refuse). */
export class Proxy {
  private server = net.createServer((client) => this.accept(client));
  private pairs = new Set<[Socket, Socket]>();
  private frozen = false;
  port = 0;
  constructor(private readonly target: { host: string; port: number }) {}

  /** Listens on `port` (0: a free one); a proxy that was shut can listen again, as a database that comes back. */
  listen(port = 0): Promise<void> {
    if (!this.server.listening) this.server = net.createServer((client) => this.accept(client));
    return new Promise((resolve) =>
      this.server.listen(port, "127.0.0.1", () => {
        this.port = (this.server.address() as net.AddressInfo).port;
        resolve();
      }),
    );
  }

  private accept(client: Socket): void {
    const upstream = net.connect(this.target.port, this.target.host);
    const pair: [Socket, Socket] = [client, upstream];
    this.pairs.add(pair);
    const drop = () => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
    if (this.frozen) this.pause(pair);
  }

  private pause([a, b]: [Socket, Socket]): void {
    a.unpipe(b);
    b.unpipe(a);
    a.pause();
    b.pause();
  }

  freeze(): void {
    this.frozen = true;
    for (const p of this.pairs) this.pause(p);
  }

  thaw(): void {
    this.frozen = false;
    for (const [a, b] of this.pairs) {
      a.pipe(b);
      b.pipe(a);
    }
  }

  /** Cuts every connection and stops listening: new connections are refused. */
  shut(): Promise<void> {
    for (const [a, b] of this.pairs) {
      a.destroy();
      b.destroy();
    }
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** A proxy listening in front of the MariaDB database at `dbUrl`, and the URL that reaches the database through it. */
export async function proxied(dbUrl: string): Promise<{ proxy: Proxy; url: string }> {
  const direct = new URL(dbUrl);
  const proxy = new Proxy({ host: direct.hostname, port: Number(direct.port || 3306) });
  await proxy.listen();
  const via = new URL(dbUrl);
  via.hostname = "127.0.0.1";
  via.port = String(proxy.port);
  return { proxy, url: via.toString() };
}
