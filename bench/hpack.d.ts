/** The part of hpack.js (no types of its own) that bench/lean-grpc.ts uses: a header block decoder. */
declare module "hpack.js" {
  interface Decompressor {
    write(block: Buffer): void;
    execute(): void;
    read(): { name: string; value: string; neverIndex: boolean } | null;
  }
  const hpack: { decompressor: { create(options: { table: { maxSize: number } }): Decompressor } };
  export default hpack;
}

/** hpack.js's copy of HPACK's static table (RFC 7541 Appendix A), for bench/lean-grpc.ts's request encoder. */
declare module "hpack.js/lib/hpack/static-table.js" {
  const staticTable: { table: { name: string; value: string }[] };
  export default staticTable;
}
