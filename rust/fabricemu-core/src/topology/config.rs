//! `[topology]`: one struct per kind (its keys only) and its checks, producing a [`TopologySpec`].

use serde::{Deserialize, Serialize};

use crate::config::check::{count, Res};
use crate::config::kinds::kind_table;
use crate::config::values::{Duration, LinkRate};
use crate::config::{Arrangement, ClosShape, LinkSpec, ScenarioError, TopologySpec};
use crate::topology::graph_file::{self, GraphFormat, LinkDefaults};

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
        Clos(ClosFile) = "clos",
        Graph(GraphFile) = "graph",
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

/// `kind = "clos"`: general three-tier Clos (`topology::clos`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClosFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<i64>,
    /// ToR (edge) switches per pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tors_per_pod: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts_per_tor: Option<i64>,
    /// Aggregation switches per pod; every ToR of the pod links to each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggs_per_pod: Option<i64>,
    /// Core switches, a multiple of `aggs_per_pod`: aggregation switch a of each pod links to
    /// the `cores / aggs_per_pod` cores of plane a.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_delay: Option<Duration>,
    /// Host <-> ToR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link_delay: Option<Duration>,
    /// ToR <-> aggregation.
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

/// `format` of a graph file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphFormatName {
    Graphml,
    Edges,
    Csv,
}

/// `kind = "graph"`: a fabric from a GraphML or edge-list file, or an inline edge list
/// (`topology::graph_file` has the formats and checks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphFile {
    /// A GraphML (`.graphml`) or edge-list (`.edges`, `.txt`, `.csv`) file; a relative path is
    /// relative to the scenario file's folder (the working directory for a scenario given as text
    /// or a dictionary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The file's format when its extension does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<GraphFormatName>,
    /// The graph as an inline edge list (instead of `file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges: Option<String>,
    /// Rate and delay of links that do not give theirs (host and switch links, then all).
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
    /// The folder of the scenario file (set when it is read from a file): where a relative
    /// `file` is. Not a key.
    #[serde(skip)]
    pub base_dir: Option<std::path::PathBuf>,
}

impl TopologyFile {
    /// Relative graph files are relative to `dir` (the scenario file's folder).
    pub fn set_base_dir(&mut self, dir: &std::path::Path) {
        if let TopologyFile::Graph(g) = self {
            g.base_dir = Some(dir.to_path_buf());
        }
    }

    pub fn validate(&self) -> Res<TopologySpec> {
        match self {
            TopologyFile::Clos(t) => t.validate(),
            TopologyFile::Graph(t) => t.validate(),
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
            (
                TopologyFile::Clos(f),
                &TopologySpec::Clos {
                    shape,
                    host,
                    fabric,
                    core,
                },
            ) => TopologyFile::Clos(ClosFile {
                pods: n(shape.pods),
                tors_per_pod: n(shape.tors_per_pod),
                hosts_per_tor: n(shape.hosts_per_tor),
                aggs_per_pod: n(shape.aggs_per_pod),
                cores: n(shape.cores),
                link_rate: rate(f.link_rate),
                link_delay: delay(f.link_delay),
                host_link_rate: r(host),
                host_link_delay: d(host),
                fabric_link_rate: r(fabric),
                fabric_link_delay: d(fabric),
                core_link_rate: r(core),
                core_link_delay: d(core),
            }),
            // A graph's links carry their own rates and delays: the defaults stay as given (an
            // absent one means "every link gives its own"), the file as written (relative to the
            // scenario's folder, so a recorded run is reproducible wherever it is moved with it).
            (TopologyFile::Graph(f), TopologySpec::Graph(_)) => TopologyFile::Graph(f.clone()),
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

impl ClosFile {
    fn validate(&self) -> Res<TopologySpec> {
        let (host, fabric) = links(
            self.link_rate,
            self.link_delay,
            (self.host_link_rate, self.host_link_delay),
            (self.fabric_link_rate, self.fabric_link_delay),
        );
        let n = |key: &str, v: Option<i64>, what: &str| {
            count(&format!("topology.{key}"), v, 1, 4096, what)
        };
        let pods = n("pods", self.pods, "an integer number of pods")?;
        let tors_per_pod = n(
            "tors_per_pod",
            self.tors_per_pod,
            "an integer number of ToR switches per pod",
        )?;
        let hosts_per_tor = n(
            "hosts_per_tor",
            self.hosts_per_tor,
            "an integer number of hosts per ToR",
        )?;
        let aggs_per_pod = n(
            "aggs_per_pod",
            self.aggs_per_pod,
            "an integer number of aggregation switches per pod",
        )?;
        let cores = n("cores", self.cores, "an integer number of core switches")?;
        if cores % aggs_per_pod != 0 {
            return Err(ScenarioError::at(
                "topology.cores",
                format!(
                    "expected a multiple of aggs_per_pod ({aggs_per_pod}): aggregation switch a \
                     of each pod links to the cores / aggs_per_pod cores of plane a, found {cores}"
                ),
            ));
        }
        if pods as u64 * tors_per_pod as u64 * hosts_per_tor as u64 > 1 << 20 {
            return Err(ScenarioError::at(
                "topology.hosts_per_tor",
                "more than 2^20 hosts",
            ));
        }
        Ok(TopologySpec::Clos {
            shape: ClosShape {
                pods,
                tors_per_pod,
                hosts_per_tor,
                aggs_per_pod,
                cores,
            },
            host,
            fabric,
            core: tier(self.core_link_rate, self.core_link_delay, fabric),
        })
    }
}

impl GraphFile {
    fn validate(&self) -> Res<TopologySpec> {
        let or = |a: Option<LinkRate>, b: Option<LinkRate>| a.or(b).map(|r| r.0);
        let or_d = |a: Option<Duration>, b: Option<Duration>| a.or(b).map(|d| d.0);
        let defaults = LinkDefaults {
            host_rate: or(self.host_link_rate, self.link_rate),
            host_delay: or_d(self.host_link_delay, self.link_delay),
            fabric_rate: or(self.fabric_link_rate, self.link_rate),
            fabric_delay: or_d(self.fabric_link_delay, self.link_delay),
        };
        let format = self.format.map(|f| match f {
            GraphFormatName::Graphml => GraphFormat::GraphMl,
            GraphFormatName::Edges | GraphFormatName::Csv => GraphFormat::Edges,
        });
        let spec =
            match (&self.file, &self.edges) {
                (Some(_), Some(_)) => {
                    return Err(ScenarioError::at(
                        "topology.edges",
                        "give the graph as a file or as inline edges, not both",
                    ))
                }
                (None, None) => return Err(ScenarioError::at(
                    "topology.file",
                    "missing: expected the path of a GraphML or edge-list file (or inline `edges`)",
                )),
                (Some(file), None) => {
                    let path = graph_file::resolve(file, self.base_dir.as_deref());
                    graph_file::read_file("topology.file", &path, file, format, defaults)?
                }
                (None, Some(text)) => {
                    if format == Some(GraphFormat::GraphMl) {
                        return Err(ScenarioError::at(
                            "topology.format",
                            "inline `edges` are an edge list: format = \"graphml\" is for files",
                        ));
                    }
                    graph_file::parse(
                        "topology.edges",
                        text,
                        "topology.edges",
                        GraphFormat::Edges,
                        defaults,
                    )?
                }
            };
        Ok(TopologySpec::Graph(std::sync::Arc::new(spec)))
    }
}
