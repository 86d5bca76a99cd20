//! `Namespaces`: the optional network of the harness when it runs as root (`--netns`). Each
//! master gets a network namespace of its own, joined to the others by a bridge in the
//! harness's namespace; links are cut by `prohibit` routes inside the namespaces (both ways)
//! and slowed by `tc netem`, as a real network fails, instead of by the TCP proxies. The
//! namespaces and the bridge are removed when the value is dropped; ones a killed harness left
//! behind are removed at the next start.

use std::process::Command;

use anyhow::Context as _;

/// The masters' subnet: master `i` is `10.77.0.(i + 1)`, the bridge `10.77.0.254`.
const SUBNET: &str = "10.77.0";

pub struct Namespaces {
    prefix: String,
    count: usize,
    /// Whether the kernel has `netem` (a module some kernels lack).
    netem: bool,
}

impl Namespaces {
    /// Creates `count` namespaces and the bridge joining them; needs root and `ip`.
    pub fn create(count: usize) -> anyhow::Result<Self> {
        remove_stale();
        let prefix = format!("rtj{}", std::process::id());
        let mut namespaces = Self { prefix, count, netem: false };
        let bridge = namespaces.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&["addr", "add", &format!("{SUBNET}.254/24"), "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for index in 0..count {
            namespaces.add_member(index)?;
        }
        let probe = ["qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"];
        namespaces.netem = tc(&namespaces.name(0), &probe).is_ok();
        let _ = tc(&namespaces.name(0), &["qdisc", "del", "dev", "lo", "root"]);
        Ok(namespaces)
    }

    fn bridge(&self) -> String {
        format!("{}b", self.prefix)
    }

    /// The namespace of master `index`.
    pub fn name(&self, index: usize) -> String {
        format!("{}n{index}", self.prefix)
    }

    /// Master `index`'s address.
    pub fn addr(index: usize) -> String {
        format!("{SUBNET}.{}", index + 1)
    }

    fn add_member(&self, index: usize) -> anyhow::Result<()> {
        let (namespace, outside) = (self.name(index), self.outside(index));
        ip(&["netns", "add", &namespace])?;
        ip(&[
            "link", "add", &outside, "type", "veth", "peer", "name", "eth0", "netns", &namespace,
        ])?;
        ip(&["link", "set", &outside, "master", &self.bridge(), "up"])?;
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &namespace, "ip"];
            all.extend_from_slice(args);
            ip(&all)
        };
        inside(&["link", "set", "lo", "up"])?;
        inside(&["addr", "add", &format!("{}/24", Self::addr(index)), "dev", "eth0"])?;
        inside(&["link", "set", "eth0", "up"])
    }

    /// The command prefix that runs a program inside master `index`'s namespace.
    pub fn exec_prefix(&self, index: usize) -> Vec<String> {
        ["netns", "exec", &self.name(index)].iter().map(|arg| arg.to_string()).collect()
    }

    /// Drops every packet from `from` to `to` (new connections are refused at once).
    pub fn cut(&self, from: usize, to: usize) -> anyhow::Result<()> {
        let route = format!("{}/32", Self::addr(to));
        // A route that is already there is fine: the link is cut either way.
        let _ = ip(&["netns", "exec", &self.name(from), "ip", "route", "add", "prohibit", &route]);
        Ok(())
    }

    /// The host end of master `index`'s veth pair (in the harness's namespace).
    fn outside(&self, index: usize) -> String {
        format!("{}v{index}", self.prefix)
    }

    /// Drops every packet master `index` sends or is sent, silently: its peers, clients,
    /// pservers and trainers see open connections that carry nothing (no refusal, no reset)
    /// and new connections that never complete. A `pfifo` queue of length 0 on both ends of
    /// its veth pair drops everything (it needs no `netem`, `iptables` or classifier module).
    pub fn silence(&self, index: usize) -> anyhow::Result<()> {
        let drop_all = |device: &str| {
            ["qdisc", "replace", "dev", device, "root", "pfifo", "limit", "0"].map(str::to_string)
        };
        let inside = drop_all("eth0");
        tc(&self.name(index), &inside.each_ref().map(String::as_str))?;
        let outside = drop_all(&self.outside(index));
        run("tc", &outside.each_ref().map(String::as_str))
    }

    /// Removes every cut, delay and silence.
    pub fn heal(&self) -> anyhow::Result<()> {
        for index in 0..self.count {
            let _ = run("tc", &["qdisc", "del", "dev", &self.outside(index), "root"]);
        }
        for from in 0..self.count {
            for to in (0..self.count).filter(|to| *to != from) {
                let route = format!("{}/32", Self::addr(to));
                let _ = ip(&[
                    "netns",
                    "exec",
                    &self.name(from),
                    "ip",
                    "route",
                    "del",
                    "prohibit",
                    &route,
                ]);
            }
            let _ = tc(&self.name(from), &["qdisc", "del", "dev", "eth0", "root"]);
        }
        Ok(())
    }

    /// Whether links can be slowed (`tc netem`), not only cut.
    pub fn can_slow(&self) -> bool {
        self.netem
    }

    /// Delays (and loses some of) every packet master `index` sends.
    pub fn slow(&self, index: usize, delay_ms: u32, loss_percent: u32) -> anyhow::Result<()> {
        let (delay, loss) = (format!("{delay_ms}ms"), format!("{loss_percent}%"));
        tc(
            &self.name(index),
            &["qdisc", "replace", "dev", "eth0", "root", "netem", "delay", &delay, "loss", &loss],
        )
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for index in 0..self.count {
            let _ = ip(&["netns", "del", &self.name(index)]);
        }
        let _ = ip(&["link", "del", &self.bridge()]);
    }
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    run("ip", args)
}

/// Runs `program` (from iproute2) with `args`; its error output on failure.
fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let output =
        Command::new(program).args(args).output().with_context(|| format!("run {program}"))?;
    anyhow::ensure!(
        output.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(())
}

fn tc(namespace: &str, args: &[&str]) -> anyhow::Result<()> {
    let mut all = vec!["netns", "exec", namespace, "tc"];
    all.extend_from_slice(args);
    ip(&all)
}

/// Namespaces and bridges of harnesses that are no longer running.
fn remove_stale() {
    let Ok(output) = Command::new("ip").args(["netns", "list"]).output() else { return };
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(pid) = name.strip_prefix("rtj").and_then(|rest| rest.split('n').next()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", name]);
            let _ = ip(&["link", "del", &format!("rtj{pid}b")]);
        }
    }
}
