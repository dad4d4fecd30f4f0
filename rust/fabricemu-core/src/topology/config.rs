//! `[topology]`: one struct per kind (its keys only) and its checks, producing a [`TopologySpec`].

use serde::{Deserialize, Serialize};

use crate::config::check::{count, Res};
use crate::config::kinds::kind_table;
use crate::config::values::{Duration, LinkRate};
use crate::config::{Arrangement, LinkSpec, ScenarioError, TopologySpec};

const DEFAULT_RATE: u64 = 100_000_000_000;
const DEFAULT_DELAY: u64 = 500_000;

kind_table!(
    /// `[topology]`: `kind` selects which keys apply.
    TopologyFile,
    TopologyKind {
        FatTree(FatTreeFile) = "fat_tree",
        LeafSpine(LeafSpineFile) = "leaf_spine",
        Dragonfly(DragonflyFile) = "dragonfly",
        DragonflyPlus(DragonflyPlusFile) = "dragonfly_plus",
    }
);

/// Global-link arrangement of the dragonfly families, as written (the aliases are kept so the
/// scenario is written back as given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArrangementName {
    Absolute,
    Consecutive,
    Relative,
    Circulant,
}

impl ArrangementName {
    fn arrangement(this: Option<Self>) -> Arrangement {
        match this {
            None | Some(Self::Absolute) | Some(Self::Consecutive) => Arrangement::Absolute,
            Some(Self::Relative) | Some(Self::Circulant) => Arrangement::Relative,
        }
    }
}

/// The link keys every kind has: a default for every link, then host and fabric overrides.
fn links(
    link_rate: Option<LinkRate>,
    link_delay: Option<Duration>,
    host: (Option<LinkRate>, Option<Duration>),
    fabric: (Option<LinkRate>, Option<Duration>),
) -> (LinkSpec, LinkSpec) {
    let rate = link_rate.map(|r| r.0).unwrap_or(DEFAULT_RATE);
    let delay = link_delay.map(|d| d.0).unwrap_or(DEFAULT_DELAY);
    let spec = |(r, d): (Option<LinkRate>, Option<Duration>)| LinkSpec {
        rate_bps: r.map(|r| r.0).unwrap_or(rate),
        delay_ps: d.map(|d| d.0).unwrap_or(delay),
    };
    (spec(host), spec(fabric))
}

/// `or` with the rate and delay given.
fn tier(rate: Option<LinkRate>, delay: Option<Duration>, or: LinkSpec) -> LinkSpec {
    LinkSpec {
        rate_bps: rate.map(|r| r.0).unwrap_or(or.rate_bps),
        delay_ps: delay.map(|d| d.0).unwrap_or(or.delay_ps),
    }
}

/// `kind = "fat_tree"`: k-ary three-tier Clos.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FatTreeFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<i64>,
    /// Default rate and delay of every link; the per-tier keys below override them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_delay: Option<Duration>,
    /// Host <-> edge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link_delay: Option<Duration>,
    /// Edge <-> aggregation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_link_delay: Option<Duration>,
    /// Aggregation <-> core; defaults to the fabric values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_link_delay: Option<Duration>,
}

/// `kind = "leaf_spine"`: two-tier Clos.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeafSpineFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaves: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spines: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts_per_leaf: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_delay: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link_delay: Option<Duration>,
    /// Leaf <-> spine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_link_delay: Option<Duration>,
}

/// `kind = "dragonfly"` (Kim et al. 2008).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DragonflyFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_delay: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link_delay: Option<Duration>,
    /// Links inside a group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_link_delay: Option<Duration>,
    /// Hosts per router.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p: Option<i64>,
    /// Routers per group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a: Option<i64>,
    /// Global links per router.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h: Option<i64>,
    /// Groups (at most a*h + 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub g: Option<i64>,
    /// `absolute` (consecutive, default) or `relative` (circulant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrangement: Option<ArrangementName>,
    /// Links between groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_link_delay: Option<Duration>,
}

/// `kind = "dragonfly_plus"` (Shpiner et al. 2017): each group a leaf-spine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DragonflyPlusFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaves: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spines: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts_per_leaf: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_delay: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link_delay: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_link_delay: Option<Duration>,
    /// Global links per spine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h: Option<i64>,
    /// Groups (at most spines*h + 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub g: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrangement: Option<ArrangementName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_link_delay: Option<Duration>,
}

impl TopologyFile {
    pub fn validate(&self) -> Res<TopologySpec> {
        match self {
            TopologyFile::FatTree(t) => t.validate(),
            TopologyFile::LeafSpine(t) => t.validate(),
            TopologyFile::Dragonfly(t) => t.validate(),
            TopologyFile::DragonflyPlus(t) => t.validate(),
        }
    }
}

impl TopologyFile {
    /// `[topology]` with every default written out (see `scenario::normalise`): each tier's rate
    /// and delay from the validated `spec`, `link_rate` / `link_delay` (the default of every
    /// tier) as given or their default, the arrangement of the dragonfly families.
    pub fn normalised(&self, spec: &TopologySpec) -> TopologyFile {
        let r = |l: LinkSpec| Some(LinkRate(l.rate_bps));
        let d = |l: LinkSpec| Some(Duration(l.delay_ps));
        let arrangement = |a: Arrangement| {
            Some(match a {
                Arrangement::Absolute => ArrangementName::Absolute,
                Arrangement::Relative => ArrangementName::Relative,
            })
        };
        let rate = |given: Option<LinkRate>| Some(given.unwrap_or(LinkRate(DEFAULT_RATE)));
        let delay = |given: Option<Duration>| Some(given.unwrap_or(Duration(DEFAULT_DELAY)));
        let n = |x: u32| Some(x as i64);
        match (self, spec) {
            (
                TopologyFile::FatTree(f),
                &TopologySpec::FatTree {
                    k,
                    host,
                    fabric,
                    core,
                },
            ) => TopologyFile::FatTree(FatTreeFile {
                k: n(k),
                link_rate: rate(f.link_rate),
                link_delay: delay(f.link_delay),
                host_link_rate: r(host),
                host_link_delay: d(host),
                fabric_link_rate: r(fabric),
                fabric_link_delay: d(fabric),
                core_link_rate: r(core),
                core_link_delay: d(core),
            }),
            (
                TopologyFile::LeafSpine(f),
                &TopologySpec::LeafSpine {
                    leaves,
                    spines,
                    hosts_per_leaf,
                    host,
                    fabric,
                },
            ) => TopologyFile::LeafSpine(LeafSpineFile {
                leaves: n(leaves),
                spines: n(spines),
                hosts_per_leaf: n(hosts_per_leaf),
                link_rate: rate(f.link_rate),
                link_delay: delay(f.link_delay),
                host_link_rate: r(host),
                host_link_delay: d(host),
                fabric_link_rate: r(fabric),
                fabric_link_delay: d(fabric),
            }),
            (
                TopologyFile::Dragonfly(f),
                &TopologySpec::Dragonfly {
                    p,
                    a,
                    h,
                    g,
                    arrangement: arr,
                    host,
                    local,
                    global,
                },
            ) => TopologyFile::Dragonfly(DragonflyFile {
                link_rate: rate(f.link_rate),
                link_delay: delay(f.link_delay),
                host_link_rate: r(host),
                host_link_delay: d(host),
                fabric_link_rate: r(local),
                fabric_link_delay: d(local),
                p: n(p),
                a: n(a),
                h: n(h),
                g: n(g),
                arrangement: arrangement(arr),
                global_link_rate: r(global),
                global_link_delay: d(global),
            }),
            (
                TopologyFile::DragonflyPlus(f),
                &TopologySpec::DragonflyPlus {
                    leaves,
                    spines,
                    hosts_per_leaf,
                    h,
                    g,
                    arrangement: arr,
                    host,
                    local,
                    global,
                },
            ) => TopologyFile::DragonflyPlus(DragonflyPlusFile {
                leaves: n(leaves),
                spines: n(spines),
                hosts_per_leaf: n(hosts_per_leaf),
                link_rate: rate(f.link_rate),
                link_delay: delay(f.link_delay),
                host_link_rate: r(host),
                host_link_delay: d(host),
                fabric_link_rate: r(local),
                fabric_link_delay: d(local),
                h: n(h),
                g: n(g),
                arrangement: arrangement(arr),
                global_link_rate: r(global),
                global_link_delay: d(global),
            }),
            // The spec is validated from this file: its kind is the file's.
            _ => unreachable!("a topology spec of another kind than its file"),
        }
    }
}

impl FatTreeFile {
    fn validate(&self) -> Res<TopologySpec> {
        let (host, fabric) = links(
            self.link_rate,
            self.link_delay,
            (self.host_link_rate, self.host_link_delay),
            (self.fabric_link_rate, self.fabric_link_delay),
        );
        let k = count(
            "topology.k",
            self.k,
            2,
            64,
            "an even integer (ports per switch)",
        )?;
        if k % 2 != 0 {
            return Err(ScenarioError::at(
                "topology.k",
                format!("expected an even integer, found {k}"),
            ));
        }
        Ok(TopologySpec::FatTree {
            k,
            host,
            fabric,
            core: tier(self.core_link_rate, self.core_link_delay, fabric),
        })
    }
}

impl LeafSpineFile {
    fn validate(&self) -> Res<TopologySpec> {
        let (host, fabric) = links(
            self.link_rate,
            self.link_delay,
            (self.host_link_rate, self.host_link_delay),
            (self.fabric_link_rate, self.fabric_link_delay),
        );
        let leaves = count(
            "topology.leaves",
            self.leaves,
            1,
            4096,
            "an integer number of leaf switches",
        )?;
        let spines = count(
            "topology.spines",
            self.spines,
            1,
            4096,
            "an integer number of spine switches",
        )?;
        let hosts_per_leaf = count(
            "topology.hosts_per_leaf",
            self.hosts_per_leaf,
            1,
            4096,
            "an integer number of hosts per leaf",
        )?;
        if leaves as u64 * hosts_per_leaf as u64 > 1 << 20 {
            return Err(ScenarioError::at(
                "topology.hosts_per_leaf",
                "more than 2^20 hosts",
            ));
        }
        Ok(TopologySpec::LeafSpine {
            leaves,
            spines,
            hosts_per_leaf,
            host,
            fabric,
        })
    }
}

/// `g` of the dragonfly families (`global_ports`: global links per group).
fn groups(g: Option<i64>, global_ports: u32) -> Res<u32> {
    count(
        "topology.g",
        g,
        2,
        global_ports as i64 + 1,
        "an integer number of groups (at most the global links per group + 1)",
    )
}

fn global_h(h: Option<i64>) -> Res<u32> {
    count(
        "topology.h",
        h,
        1,
        256,
        "an integer number of global links per router",
    )
}

fn at_most_2_20_hosts(hosts: u32) -> Res<()> {
    if hosts > 1 << 20 {
        return Err(ScenarioError::at("topology.g", "more than 2^20 hosts"));
    }
    Ok(())
}

impl DragonflyFile {
    fn validate(&self) -> Res<TopologySpec> {
        let (host, local) = links(
            self.link_rate,
            self.link_delay,
            (self.host_link_rate, self.host_link_delay),
            (self.fabric_link_rate, self.fabric_link_delay),
        );
        let global = tier(self.global_link_rate, self.global_link_delay, local);
        let h = global_h(self.h)?;
        let p = count(
            "topology.p",
            self.p,
            1,
            1024,
            "an integer number of hosts per router",
        )?;
        let a = count(
            "topology.a",
            self.a,
            1,
            1024,
            "an integer number of routers per group",
        )?;
        let g = groups(self.g, a * h)?;
        at_most_2_20_hosts(p * a * g)?;
        Ok(TopologySpec::Dragonfly {
            p,
            a,
            h,
            g,
            arrangement: ArrangementName::arrangement(self.arrangement),
            host,
            local,
            global,
        })
    }
}

impl DragonflyPlusFile {
    fn validate(&self) -> Res<TopologySpec> {
        let (host, local) = links(
            self.link_rate,
            self.link_delay,
            (self.host_link_rate, self.host_link_delay),
            (self.fabric_link_rate, self.fabric_link_delay),
        );
        let global = tier(self.global_link_rate, self.global_link_delay, local);
        let h = global_h(self.h)?;
        let leaves = count(
            "topology.leaves",
            self.leaves,
            1,
            1024,
            "an integer number of leaves per group",
        )?;
        let spines = count(
            "topology.spines",
            self.spines,
            1,
            1024,
            "an integer number of spines per group",
        )?;
        let hosts_per_leaf = count(
            "topology.hosts_per_leaf",
            self.hosts_per_leaf,
            1,
            1024,
            "an integer number of hosts per leaf",
        )?;
        let g = groups(self.g, spines * h)?;
        at_most_2_20_hosts(leaves * hosts_per_leaf * g)?;
        Ok(TopologySpec::DragonflyPlus {
            leaves,
            spines,
            hosts_per_leaf,
            h,
            g,
            arrangement: ArrangementName::arrangement(self.arrangement),
            host,
            local,
            global,
        })
    }
}
