"""What a KVM probe's output on a host means (host_accel.read_probe), and who may open the device
(kvm_opens): each answer the probe script prints, and the payload user's access."""

from __future__ import annotations

from skylease.runtime.leases.host_accel import kvm_opens, probe_script, read_probe
from skylease.runtime.leases.qemu_spec import GuestSpec
from skylease.runtime.leases.sandbox import PayloadUser

USER = PayloadUser("skylease-payload", 990, 990)
HOST = "root@127.0.0.9:22"


def test_each_answer_of_the_probe_is_a_choice_with_the_host_s_name_in_its_reason():
    cases = {"missing": ("tcg", "/dev/kvm is missing on"),
             "denied": ("tcg", "not readable and writable by its SSH user"),
             "device 660 0 104\nbooted 9": ("kvm", "booted under KVM on"),
             "device 660 0 104\nended qemu: failed to initialize kvm": ("tcg", "failed to initialize kvm"),
             "device 660 0 104\nsilent": ("tcg", "printed nothing in 6 s"),
             "": ("tcg", "said nothing")}
    for out, (accel, words) in cases.items():
        choice = read_probe(out, HOST, None, 6.0, took=1.0)
        assert choice.accel == accel and words in choice.reason, (out, choice)
        assert HOST in choice.reason, choice


def test_kvm_that_boots_but_the_payload_user_cannot_open_is_tcg():
    assert read_probe("device 660 0 104\nbooted 9", HOST, USER).accel == "tcg"  # (root:kvm, 0660)
    assert read_probe("device 666 0 104\nbooted 9", HOST, USER).accel == "kvm"  # (world read-write)
    assert read_probe("device 660 0 990\nbooted 9", HOST, USER).accel == "kvm"  # (its group)
    assert kvm_opens(0o600, 990, 0, USER, as_caller=False)
    assert not kvm_opens(0o660, 0, 0, USER, as_caller=True)
    assert kvm_opens(0o600, 0, 0, None, as_caller=True) and not kvm_opens(0o666, 0, 0, None, as_caller=False)


def test_the_probe_script_boots_the_kernel_under_kvm_and_kills_it_by_its_pid():
    spec = GuestSpec(kernel="/c/guest/vmlinuz", initrd="/c/guest/initrd.img", memory_mb=96)
    script = probe_script("qemu-system-x86_64", spec, ".skylease/x/kvm-probe", timeout=2.0)
    assert "-accel kvm" in script and "-kernel /c/guest/vmlinuz" in script
    assert "while [ $i -lt 20 ]" in script and "kill -9 $p" in script
    assert "rm -rf .skylease/x/kvm-probe" in script
