//! Deterministic sample inputs (logs, JSON, prose) for tests and `svc bench`: the same seed
//! gives the same bytes on every machine, so figures are comparable between runs.

/// A small xorshift generator: deterministic, dependency-free, good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const PATHS: [&str; 8] = [
    "/api/v1/orders",
    "/api/v1/orders/{id}",
    "/api/v1/users/{id}",
    "/api/v1/search",
    "/healthz",
    "/metrics",
    "/api/v1/cart/{id}/items",
    "/static/app.js",
];

/// A web-service log of `lines` records: mostly request lines and health checks, periodic
/// housekeeping, some warnings, and rare errors with stack traces.
pub fn log(lines: usize, seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let mut out = String::with_capacity(lines * 110);
    let mut seconds: u64 = 1_700_000_000 % 86_400;
    let mut n = 0;
    out.push_str("2024-05-14T00:00:00.000Z INFO  server: starting order-service v2.14.3 (pid 4121) on 0.0.0.0:8080\n");
    n += 1;
    while n < lines {
        seconds += rng.below(3) as u64;
        let (h, m, s) = ((seconds / 3600) % 24, (seconds / 60) % 60, seconds % 60);
        let ms = rng.below(1000);
        let stamp = format!("2024-05-14T{h:02}:{m:02}:{s:02}.{ms:03}Z");
        let roll = rng.below(1000);
        let request = format!("{:016x}", rng.next_u64());
        if roll < 3 {
            out.push_str(&format!(
                "{stamp} ERROR handler: request {request} failed: connection refused (os error 111) while calling inventory-service at 10.0.{}.{}:9000\n",
                rng.below(8),
                rng.below(255)
            ));
            out.push_str("    at inventory::client::Client::reserve (src/client.rs:214)\n");
            out.push_str("    at orders::checkout::place_order (src/checkout.rs:88)\n");
            out.push_str("    at orders::http::post_order (src/http.rs:41)\n");
            n += 4;
        } else if roll < 5 {
            out.push_str(&format!(
                "{stamp} ERROR db: query timeout after 5000ms on orders_by_user (user_id={}), pool 18/20 busy\n",
                rng.below(100_000)
            ));
            n += 1;
        } else if roll < 25 {
            out.push_str(&format!(
                "{stamp} WARN  http: slow request {request} GET {} took {}ms (threshold 800ms)\n",
                rng.pick(&PATHS)
                    .replace("{id}", &rng.below(99_999).to_string()),
                800 + rng.below(4000)
            ));
            n += 1;
        } else if roll < 200 {
            out.push_str(&format!(
                "{stamp} DEBUG health: GET /healthz 200 {}us\n",
                50 + rng.below(400)
            ));
            n += 1;
        } else if roll < 215 {
            out.push_str(&format!(
                "{stamp} INFO  gc: pause {}.{}ms, heap {}MB -> {}MB\n",
                rng.below(20),
                rng.below(10),
                400 + rng.below(200),
                200 + rng.below(100)
            ));
            n += 1;
        } else {
            let method = *rng.pick(&["GET", "GET", "GET", "POST", "PUT", "DELETE"]);
            let status = *rng.pick(&[200, 200, 200, 200, 201, 204, 304, 404]);
            out.push_str(&format!(
                "{stamp} INFO  http: {method} {} {status} {}ms request_id={request} user={}\n",
                rng.pick(&PATHS)
                    .replace("{id}", &rng.below(99_999).to_string()),
                rng.below(300),
                rng.below(50_000)
            ));
            n += 1;
        }
    }
    out.push_str("2024-05-14T23:59:59.999Z INFO  server: shutting down after SIGTERM, 0 requests in flight\n");
    out
}

const WORDS: [&str; 24] = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "order",
    "shipment",
    "invoice",
    "refund",
    "customer",
    "warehouse",
    "priority",
    "express",
    "standard",
    "pending",
    "delivered",
    "returned",
    "berlin",
    "lisbon",
    "osaka",
    "toronto",
    "blue",
    "green",
    "large",
    "small",
];

/// A JSON document: metadata plus `records` order records with nested objects, tag arrays and
/// long free-text notes.
pub fn json(records: usize, seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let items: Vec<serde_json::Value> = (0..records)
        .map(|i| {
            let note: Vec<&str> = (0..10 + rng.below(60)).map(|_| *rng.pick(&WORDS)).collect();
            serde_json::json!({
                "id": format!("ord_{:08x}", rng.next_u64() as u32),
                "index": i,
                "status": rng.pick(&["pending", "shipped", "delivered", "returned"]),
                "customer": {
                    "id": rng.below(1_000_000),
                    "name": format!("{} {}", rng.pick(&WORDS), rng.pick(&WORDS)),
                    "city": rng.pick(&["Berlin", "Lisbon", "Osaka", "Toronto"]),
                },
                "lines": (0..1 + rng.below(4)).map(|_| serde_json::json!({
                    "sku": format!("SKU-{}", rng.below(100_000)),
                    "quantity": 1 + rng.below(5),
                    "price_cents": 100 + rng.below(100_000),
                })).collect::<Vec<_>>(),
                "tags": (0..rng.below(6)).map(|_| *rng.pick(&WORDS)).collect::<Vec<_>>(),
                "note": note.join(" "),
            })
        })
        .collect();
    let document = serde_json::json!({
        "api_version": "2024-05-01",
        "generated_at": "2024-05-14T12:00:00Z",
        "query": {"status": "any", "limit": records, "cursor": null},
        "total": records,
        "results": items,
    });
    // Pretty output, as APIs and dumps usually ship it.
    serde_json::to_string_pretty(&document).unwrap_or_default()
}

/// Paragraphs of report-like prose: some sentences carry numbers and names, most are filler.
pub fn prose(paragraphs: usize, seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let filler = [
        "This section describes the general approach that the team took over the period.",
        "As discussed in earlier meetings, the overall direction remains broadly the same.",
        "There were a number of conversations about how best to proceed with the work.",
        "Several people raised points that were taken into account during the planning.",
        "It is generally agreed that the process could be improved in various ways.",
        "The details of the discussion are summarised in the notes that follow below.",
    ];
    let facts = [
        "Checkout latency at p99 fell from 840 ms to 310 ms after the Redis cache went live on 12 March.",
        "The Lisbon warehouse shipped 18,240 orders in April, 7% more than in March.",
        "Refund requests rose to 2.4% of orders when the Osaka carrier missed its SLA for 9 days.",
        "Maria Okafor owns the inventory-service migration, due on 30 June.",
        "The PostgreSQL 16 upgrade cut storage by 212 GB through better TOAST compression.",
        "Error budget burn for order-service reached 64% in week 19 because of the DNS outage.",
    ];
    let mut out = String::from("# Quarterly operations report\n\n");
    for p in 0..paragraphs {
        if p % 4 == 0 {
            out.push_str(&format!("## Section {}\n\n", p / 4 + 1));
        }
        let sentences = 3 + rng.below(5);
        let mut line = Vec::new();
        for _ in 0..sentences {
            if rng.below(4) == 0 {
                line.push(*rng.pick(&facts));
            } else {
                line.push(*rng.pick(&filler));
            }
        }
        out.push_str(&line.join(" "));
        out.push_str("\n\n");
    }
    out
}

/// Log files of several real-world shapes with the names they get in the wild, for the kind
/// detection figure: a service log, syslog, a Python application log with tracebacks, an
/// access log, JSON Lines records and a build log, each named `.log`, rotated (`.log.1`),
/// `.out`, `.txt` or with no extension. `count` files, seeded.
pub fn log_files(count: usize, seed: u64) -> Vec<(String, String)> {
    let mut rng = Rng::new(seed);
    let names = [
        "service.log",
        "service.log.1",
        "nohup.out",
        "output.txt",
        "server-2024-05-14",
        "build.log",
    ];
    (0..count)
        .map(|i| {
            let lines = 40 + rng.below(400);
            let shape = i % 6;
            let text = match shape {
                0 => log(lines, seed + i as u64),
                1 => syslog(lines, &mut rng),
                2 => python_log(lines, &mut rng),
                3 => access_log(lines, &mut rng),
                4 => json_lines_log(lines, &mut rng),
                _ => build_log(lines, &mut rng),
            };
            let name = names[(i / 6 + shape) % names.len()];
            (format!("logs/{i:02}/{name}"), text)
        })
        .collect()
}

fn clock(rng: &mut Rng, seconds: &mut u64) -> (u64, u64, u64) {
    *seconds += rng.below(4) as u64;
    ((*seconds / 3600) % 24, (*seconds / 60) % 60, *seconds % 60)
}

fn syslog(lines: usize, rng: &mut Rng) -> String {
    let mut out = String::new();
    let mut seconds = rng.below(80_000) as u64;
    for _ in 0..lines {
        let (h, m, s) = clock(rng, &mut seconds);
        let (unit, message) = match rng.below(10) {
            0 => (
                "sshd",
                format!(
                    "Failed password for invalid user admin from 203.0.113.{} port {} ssh2",
                    rng.below(255),
                    30000 + rng.below(30000)
                ),
            ),
            1..=3 => (
                "sshd",
                format!(
                    "Accepted publickey for deploy from 198.51.100.{} port {} ssh2",
                    rng.below(255),
                    30000 + rng.below(30000)
                ),
            ),
            4 => (
                "kernel",
                format!(
                    "[{}.{:06}] eth0: link up, 1000Mbps, full-duplex",
                    rng.below(90_000),
                    rng.below(1_000_000)
                ),
            ),
            5 => (
                "CRON",
                "(root) CMD (run-parts /etc/cron.hourly)".to_string(),
            ),
            _ => (
                "systemd",
                format!("Started Session {} of user deploy.", rng.below(9999)),
            ),
        };
        out.push_str(&format!(
            "May 14 {h:02}:{m:02}:{s:02} web-{} {unit}[{}]: {message}\n",
            rng.below(4),
            100 + rng.below(30_000)
        ));
    }
    out
}

fn python_log(lines: usize, rng: &mut Rng) -> String {
    let mut out = String::new();
    let mut seconds = rng.below(80_000) as u64;
    let mut n = 0;
    while n < lines {
        let (h, m, s) = clock(rng, &mut seconds);
        let stamp = format!("2024-05-14 {h:02}:{m:02}:{s:02},{:03}", rng.below(1000));
        if rng.below(40) == 0 {
            out.push_str(&format!(
                "{stamp} - app.worker - ERROR - task {} failed\n",
                rng.below(99_999)
            ));
            out.push_str("Traceback (most recent call last):\n");
            out.push_str("  File \"/srv/app/worker.py\", line 88, in run\n    result = task()\n");
            out.push_str("  File \"/srv/app/tasks.py\", line 31, in fetch\n    raise TimeoutError(\"upstream timed out\")\n");
            out.push_str("TimeoutError: upstream timed out\n");
            n += 7;
        } else {
            let level = *rng.pick(&["INFO", "INFO", "INFO", "DEBUG", "WARNING"]);
            out.push_str(&format!(
                "{stamp} - app.worker - {level} - processed batch {} ({} items) in {} ms\n",
                rng.below(99_999),
                rng.below(500),
                rng.below(2000)
            ));
            n += 1;
        }
    }
    out
}

fn access_log(lines: usize, rng: &mut Rng) -> String {
    let mut out = String::new();
    let mut seconds = rng.below(80_000) as u64;
    for _ in 0..lines {
        let (h, m, s) = clock(rng, &mut seconds);
        let path = rng
            .pick(&PATHS)
            .replace("{id}", &rng.below(99_999).to_string());
        let status = *rng.pick(&[200, 200, 200, 301, 304, 404, 500]);
        out.push_str(&format!(
            "10.0.{}.{} - - [14/May/2024:{h:02}:{m:02}:{s:02} +0000] \"GET {path} HTTP/1.1\" {status} {} \"-\" \"Mozilla/5.0\"\n",
            rng.below(255),
            rng.below(255),
            rng.below(50_000)
        ));
    }
    out
}

fn json_lines_log(lines: usize, rng: &mut Rng) -> String {
    let mut out = String::new();
    let mut seconds = rng.below(80_000) as u64;
    for _ in 0..lines {
        let (h, m, s) = clock(rng, &mut seconds);
        let level = *rng.pick(&["info", "info", "info", "debug", "warn", "error"]);
        out.push_str(&format!(
            "{{\"ts\":\"2024-05-14T{h:02}:{m:02}:{s:02}Z\",\"level\":\"{level}\",\"msg\":\"request handled\",\"path\":\"{}\",\"status\":{},\"ms\":{}}}\n",
            rng.pick(&PATHS),
            *rng.pick(&[200, 201, 404, 500]),
            rng.below(900)
        ));
    }
    out
}

fn build_log(lines: usize, rng: &mut Rng) -> String {
    let mut out = String::new();
    let crates = ["serde", "tokio", "regex", "clap", "rayon", "anyhow", "libc"];
    let mut seconds = rng.below(80_000) as u64;
    for i in 0..lines {
        let (h, m, s) = clock(rng, &mut seconds);
        let line = match rng.below(12) {
            0 => format!(
                "WARNING: unused variable `x{i}` in src/lib.rs:{}",
                rng.below(900)
            ),
            1 => format!("ERROR: test tests::case_{i} failed: assertion `left == right` failed"),
            _ => format!(
                "INFO Compiling {} v1.{}.{}",
                rng.pick(&crates),
                rng.below(40),
                rng.below(10)
            ),
        };
        out.push_str(&format!("[{h:02}:{m:02}:{s:02}] {line}\n"));
    }
    out
}
