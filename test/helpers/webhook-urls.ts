/**
 * Webhook endpoint URLs for the host guard's tests (test/unit/webhook-guard.test.ts,
 * test/api/webhook-hosts.test.ts): spellings of loopback, private, link-local and metadata
 * addresses that must be refused by default, and public ones that must pass.
 */

/** URL spellings webhooks must refuse (the default, WEBHOOK_ALLOW_PRIVATE_HOSTS unset). */
export const REFUSED_URLS: readonly string[] = [
  // loopback
  "http://127.0.0.1:9999/hook",
  "http://127.1/",
  "http://2130706433/",
  "http://0x7f.1/",
  "http://0177.0.0.1/",
  "http://0x7f000001/",
  "http://127.0.0.1./",
  "http://localhost/",
  "http://localhost./",
  "http://LocalHost../",
  "http://api.localhost/",
  "http://[::1]/",
  "http://[0:0:0:0:0:0:0:1]/",
  "http://[::ffff:127.0.0.1]:9999/",
  "http://[::ffff:7f00:1]/",
  "http://[0:0:0:0:0:ffff:127.0.0.1]/",
  "http://[::127.0.0.1]/",
  "http://[::ffff:0:127.0.0.1]/",
  "http://[64:ff9b::127.0.0.1]/",
  "http://[2002:7f00:1::1]/",
  "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",
  // private, CGNAT, unique-local, site-local
  "http://10.0.0.1/",
  "http://0xa.1/",
  "http://172.16.5.4/",
  "http://192.168.1.1/",
  "http://[::ffff:10.0.0.1]/",
  "http://[::ffff:c0a8:101]/",
  "http://[2002:c0a8:101::]/",
  "http://100.64.0.1/",
  "http://[fd12:3456::1]/",
  "http://[fec0::1]/",
  "http://[64:ff9b:1::a00:1]/",
  // link-local and cloud metadata
  "http://169.254.169.254/latest/meta-data/",
  "http://[::ffff:169.254.169.254]/",
  "http://[::ffff:a9fe:a9fe]/",
  "http://2852039166/",
  "http://0xa9.0xfe.0xa9.0xfe/",
  "http://0251.0376.0251.0376/",
  "http://[64:ff9b::169.254.169.254]/",
  "http://[fe80::1]/",
  "http://[fd00:ec2::254]/",
  // unspecified, multicast, broadcast, reserved
  "http://0.0.0.0/",
  "http://0/",
  "http://[::]/",
  "http://224.0.0.1/",
  "http://255.255.255.255/",
  "http://240.0.0.1/",
  "http://[ff02::1]/",
  "http://[2001:db8::1]/",
];

/** Public hosts webhooks may reach, some of them spelled the way refused ones are. */
export const ALLOWED_URLS: readonly string[] = [
  "https://hooks.example.org/billing",
  "https://localhost.example.com/hook",
  "http://8.8.8.8/",
  "http://1.1.1.1:8080/",
  "http://134744072/",
  "http://100.128.0.1/",
  "http://172.32.0.1/",
  "http://169.253.1.1/",
  "http://[2606:4700:4700::1111]/",
  "http://[2001:4860:4860::8888]/",
  "http://[::ffff:8.8.8.8]/",
  "http://[64:ff9b::8.8.8.8]/",
  "http://[2002:808:808::1]/",
];
