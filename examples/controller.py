"""An example live controller for fabricemu (docs/control.md).

Run it on the congested all-reduce scenario:

    fabricemu run scenarios/allreduce_congested.toml --set control.policy=none \\
        --controller examples.controller:avoid_hot_links -o runs/congested-python

or from Python:

    import fabricemu
    from examples.controller import avoid_hot_links
    result = fabricemu.run("scenarios/allreduce_congested.toml", controller=avoid_hot_links)
    print(result.actions)

The controller is called every control interval (simulated time) with a
``fabricemu.control.Telemetry``. It looks at the links that lead to the ranks of each collective
group: when one of them was busy with other traffic in the last interval (the group itself idle,
between calls), the group's next call runs as a double binary tree, which sends less through
each rank's downlink at a time than the ring; otherwise as a ring. Its decisions depend only on
the telemetry, so the run stays reproducible.
"""

from __future__ import annotations

from typing import Dict, List

from fabricemu.control import Action, SetAlgorithm, Telemetry

#: A downlink busier than this in an idle interval counts as congested.
HOT = 0.3


def avoid_hot_links(t: Telemetry) -> List[Action]:
    if t.interval_ps == 0:
        return []  # the first boundary, at time 0: nothing measured yet
    cols = t.columns
    # Utilisation of the link into each host (its downlink).
    into: Dict[int, float] = {}
    for peer, util in zip(cols["peer"], cols["utilisation"]):
        into[peer] = max(into.get(peer, 0.0), util)
    actions: List[Action] = []
    for c in t.collectives:
        idle = c.current_call is None or not c.current_started
        if c.next_call is None or not idle:
            continue
        # The group is idle: what its ranks' downlinks carried is background traffic.
        congested = any(into.get(h, 0.0) > HOT for h in c.hosts)
        want = "tree" if congested else "ring"
        if c.next_algorithm != want:
            actions.append(SetAlgorithm(c.collective, want))
    return actions
