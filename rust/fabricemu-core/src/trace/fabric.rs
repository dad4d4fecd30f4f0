//! nodes.arrow and ports.arrow: the fabric a run was built on, by name, so every table with node
//! or port ids joins to names (`"agg:3"`, `"gpu:17"`) and places (pod, group, plane, server, rack,
//! rail, domain). Written once per run, from the built fabric (small: one row per node and per
//! port).
//!
//! - **nodes**: `node` (id), `name` (`"<role>:<index>"`, exactly what `[[fault]]` accepts), `role`,
//!   `index` (position among the nodes of that role), `host` (whether it is an endpoint: a host or
//!   GPU), `ports`, and `pod`, `group`, `plane`, `server`, `rack`, `rail`, `domain` (null where
//!   they do not apply; see [`crate::topology::nodes`]).
//! - **ports**: one row per port, which is one direction of a link (links.arrow's `link` and
//!   queues.arrow's and pfc.arrow's `port` are port ids): `port`, `node`, `node_name`, `index`
//!   (the port's position on its node), `peer_node`, `peer_name`, `peer_port` (the reverse
//!   direction's port), `rate_bps`, `delay_ps`, `tier`.

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Int64Builder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_ipc::writer::FileWriter;
use arrow_schema::{DataType, Field, Schema};

use super::atomic::AtomicFile;
use super::tables::{dict_field, int64, DictColumn, TIER_NAMES, TIER_NAMES_OCS};
use crate::config::TopologySpec;
use crate::topology::nodes::{node_name, places};
use crate::topology::Fabric;

/// File names in the output folder.
pub const NODES_FILE: &str = "nodes.arrow";
pub const PORTS_FILE: &str = "ports.arrow";

fn schema(fields: Vec<Field>, metadata: &[(String, String)]) -> Arc<Schema> {
    let metadata: HashMap<String, String> = metadata.iter().cloned().collect();
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

/// The nodes table of `fabric` (built from `topology`).
pub fn nodes_batch(
    fabric: &Fabric,
    topology: &TopologySpec,
    metadata: &[(String, String)],
) -> io::Result<RecordBatch> {
    use DataType::{Boolean, UInt32};
    let places = places(fabric, topology);
    let n = fabric.num_nodes as usize;
    let names: Vec<String> = fabric
        .nodes()
        .map(|v| node_name(fabric, v, places[v].index))
        .collect();
    let mut name = DictColumn::new(&names);
    let mut roles: Vec<&str> = Vec::new();
    for r in fabric.role.iter() {
        if !roles.contains(&r.as_str()) {
            roles.push(r.as_str());
        }
    }
    let mut role = DictColumn::new(&roles);
    let mut node = UInt32Builder::with_capacity(n);
    let mut index = UInt32Builder::with_capacity(n);
    let mut host = BooleanBuilder::with_capacity(n);
    let mut ports = UInt32Builder::with_capacity(n);
    let mut opt: [UInt32Builder; 7] = std::array::from_fn(|_| UInt32Builder::with_capacity(n));
    for (k, v) in fabric.nodes().enumerate() {
        let p = places[v];
        node.append_value(v.get());
        name.append(k);
        let r = fabric.role[v].as_str();
        role.append(roles.iter().position(|x| *x == r).expect("listed"));
        index.append_value(p.index);
        host.append_value(fabric.is_host(v));
        ports.append_value(fabric.ports_of(v).len() as u32);
        let values = [p.pod, p.group, p.plane, p.server, p.rack, p.rail, p.domain];
        for (b, value) in opt.iter_mut().zip(values) {
            b.append_option(value);
        }
    }
    let mut fields = vec![
        Field::new("node", UInt32, false),
        dict_field("name", false),
        dict_field("role", false),
        Field::new("index", UInt32, false),
        Field::new("host", Boolean, false),
        Field::new("ports", UInt32, false),
    ];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(node.finish()),
        name.finish(),
        role.finish(),
        Arc::new(index.finish()),
        Arc::new(host.finish()),
        Arc::new(ports.finish()),
    ];
    let opt_names = ["pod", "group", "plane", "server", "rack", "rail", "domain"];
    for (col, mut b) in opt_names.into_iter().zip(opt) {
        fields.push(Field::new(col, UInt32, true));
        columns.push(Arc::new(b.finish()));
    }
    RecordBatch::try_new(schema(fields, metadata), columns).map_err(io::Error::other)
}

/// The ports table of `fabric`.
pub fn ports_batch(fabric: &Fabric, metadata: &[(String, String)]) -> io::Result<RecordBatch> {
    use DataType::{Int64, UInt32};
    let indices = crate::topology::nodes::role_indices(fabric);
    let names: Vec<String> = fabric
        .nodes()
        .map(|v| node_name(fabric, v, indices[v]))
        .collect();
    let n = fabric.num_ports() as usize;
    let mut port = UInt32Builder::with_capacity(n);
    let mut node = UInt32Builder::with_capacity(n);
    let mut node_name_col = DictColumn::new(&names);
    let mut index = UInt32Builder::with_capacity(n);
    let mut peer_node = UInt32Builder::with_capacity(n);
    let mut peer_name = DictColumn::new(&names);
    let mut peer_port = UInt32Builder::with_capacity(n);
    let mut rate = Int64Builder::with_capacity(n);
    let mut delay = Int64Builder::with_capacity(n);
    let mut tier = if fabric.ocs.is_some() {
        DictColumn::new(&TIER_NAMES_OCS)
    } else {
        DictColumn::new(&TIER_NAMES)
    };
    for v in fabric.nodes() {
        let first = fabric.ports_of(v).next().map_or(0, |p| p.get());
        for p in fabric.ports_of(v) {
            port.append_value(p.get());
            node.append_value(v.get());
            node_name_col.append(v.index());
            index.append_value(p.get() - first);
            let peer = fabric.peer_node[p];
            peer_node.append_value(peer.get());
            peer_name.append(peer.index());
            peer_port.append_value(fabric.peer_port[p].get());
            rate.append_value(int64(fabric.rate_bps[p]));
            delay.append_value(int64(fabric.delay_ps[p]));
            tier.append(fabric.tier[p] as usize);
        }
    }
    let fields = vec![
        Field::new("port", UInt32, false),
        Field::new("node", UInt32, false),
        dict_field("node_name", false),
        Field::new("index", UInt32, false),
        Field::new("peer_node", UInt32, false),
        dict_field("peer_name", false),
        Field::new("peer_port", UInt32, false),
        Field::new("rate_bps", Int64, false),
        Field::new("delay_ps", Int64, false),
        dict_field("tier", false),
    ];
    let columns: Vec<ArrayRef> = vec![
        Arc::new(port.finish()),
        Arc::new(node.finish()),
        node_name_col.finish(),
        Arc::new(index.finish()),
        Arc::new(peer_node.finish()),
        peer_name.finish(),
        Arc::new(peer_port.finish()),
        Arc::new(rate.finish()),
        Arc::new(delay.finish()),
        tier.finish(),
    ];
    RecordBatch::try_new(schema(fields, metadata), columns).map_err(io::Error::other)
}

fn write_batch(path: &Path, batch: &RecordBatch) -> io::Result<()> {
    let file = AtomicFile::create(path)?;
    let mut w = FileWriter::try_new(file, &batch.schema()).map_err(io::Error::other)?;
    w.write(batch).map_err(io::Error::other)?;
    w.finish().map_err(io::Error::other)?;
    w.into_inner().map_err(io::Error::other)?.commit()
}

/// The nodes and ports tables of `fabric` as the bytes of two Arrow IPC files (what nodes.arrow
/// and ports.arrow hold, without schema metadata): for tools that want the fabric without a run.
pub fn fabric_tables_ipc(
    fabric: &Fabric,
    topology: &TopologySpec,
) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let ipc = |b: RecordBatch| -> io::Result<Vec<u8>> {
        let mut w = FileWriter::try_new(Vec::new(), &b.schema()).map_err(io::Error::other)?;
        w.write(&b).map_err(io::Error::other)?;
        w.finish().map_err(io::Error::other)?;
        w.into_inner().map_err(io::Error::other)
    };
    Ok((
        ipc(nodes_batch(fabric, topology, &[])?)?,
        ipc(ports_batch(fabric, &[])?)?,
    ))
}

/// Write `dir/nodes.arrow` and `dir/ports.arrow`, each atomically.
pub fn write_fabric_tables(
    dir: &Path,
    fabric: &Fabric,
    topology: &TopologySpec,
    metadata: &[(String, String)],
) -> io::Result<()> {
    write_batch(
        &dir.join(NODES_FILE),
        &nodes_batch(fabric, topology, metadata)?,
    )?;
    write_batch(&dir.join(PORTS_FILE), &ports_batch(fabric, metadata)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LinkSpec;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, UInt32Type};

    fn strings(b: &RecordBatch, col: &str) -> Vec<Option<String>> {
        let a = b.column(b.schema().index_of(col).unwrap());
        let d = a.as_dictionary::<Int32Type>();
        let values = d.values().as_string::<i32>();
        d.keys()
            .iter()
            .map(|k| k.map(|k| values.value(k as usize).to_string()))
            .collect()
    }

    fn u32s(b: &RecordBatch, col: &str) -> Vec<Option<u32>> {
        let a = b.column(b.schema().index_of(col).unwrap());
        a.as_primitive::<UInt32Type>().iter().collect()
    }

    #[test]
    fn leaf_spine_nodes_and_ports_name_both_ends() {
        let l = LinkSpec {
            rate_bps: 100_000_000_000,
            delay_ps: 500_000,
        };
        let topo = TopologySpec::LeafSpine {
            leaves: 2,
            spines: 3,
            hosts_per_leaf: 2,
            host: l,
            fabric: LinkSpec {
                rate_bps: 400_000_000_000,
                delay_ps: 1_000_000,
            },
        };
        let f = crate::topology::build_with(&topo, None);
        let nodes = nodes_batch(&f, &topo, &[]).unwrap();
        assert_eq!(nodes.num_rows(), 4 + 2 + 3);
        let names = strings(&nodes, "name");
        assert_eq!(names[0].as_deref(), Some("host:0"));
        assert_eq!(names[4].as_deref(), Some("leaf:0"));
        assert_eq!(names[8].as_deref(), Some("spine:2"));
        assert_eq!(strings(&nodes, "role")[5].as_deref(), Some("leaf"));
        assert!(u32s(&nodes, "pod").iter().all(Option::is_none));

        let ports = ports_batch(&f, &[]).unwrap();
        assert_eq!(ports.num_rows(), f.num_ports() as usize);
        // Host 3's one port goes to leaf 1; the leaf's port back is its peer_port.
        let node_names = strings(&ports, "node_name");
        let peer_names = strings(&ports, "peer_name");
        assert_eq!(node_names[3].as_deref(), Some("host:3"));
        assert_eq!(peer_names[3].as_deref(), Some("leaf:1"));
        let peer_port = u32s(&ports, "peer_port")[3].unwrap() as usize;
        assert_eq!(peer_names[peer_port].as_deref(), Some("host:3"));
        assert_eq!(strings(&ports, "tier")[3].as_deref(), Some("host"));
        // A leaf's uplink: tier fabric, 400 Gbps, 1 us.
        let up = (0..ports.num_rows())
            .find(|&i| {
                node_names[i].as_deref() == Some("leaf:0")
                    && strings(&ports, "tier")[i].as_deref() == Some("fabric")
            })
            .unwrap();
        let rate = ports.column(ports.schema().index_of("rate_bps").unwrap());
        let rate = rate.as_primitive::<arrow_array::types::Int64Type>();
        assert_eq!(rate.value(up), 400_000_000_000);
        assert!(peer_names[up].as_deref().unwrap().starts_with("spine:"));
    }

    #[test]
    fn tier_names_follow_the_tier_order() {
        use crate::topology::Tier;
        for t in [
            Tier::Host,
            Tier::Fabric,
            Tier::Core,
            Tier::Global,
            Tier::ScaleUp,
            Tier::Pcie,
        ] {
            assert_eq!(
                TIER_NAMES[t as usize],
                crate::topology::summary::tier_name(t)
            );
        }
    }
}
