"""Prices from SkyPilot's catalogs: real-format fixtures (rows cut from each cloud's vms.csv)."""

import datetime
import json

import pytest
from conftest import run_cli
from test_cost import bench_results

from ampgan.cost.catalog import find_instance, load_catalog, staleness_warning
from ampgan.cost.skypilot import find_catalogs, load_skypilot

GPU_INFO_A100 = (
    "\"{'Gpus': [{'Name': 'A100', 'Manufacturer': 'NVIDIA', 'Count': 8, 'LogicalGpuCount': 8, "
    "'GpuPartitionSize': 1.0, 'Workloads': ['ml-ai'], 'MemoryInfo': {'SizeInMiB': 40960}}], "
    "'TotalGpuMemoryInMiB': 327680}\""
)
AWS = "\n".join(
    [
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch",
        "g4dn.xlarge,T4,1.0,4.0,16.0,\"{'Gpus': [{'Name': 'T4', 'Count': 1}]}\",0.526,0.2104,us-east-1,use1-az1,x86_64",
        "g4dn.xlarge,T4,1.0,4.0,16.0,\"{'Gpus': [{'Name': 'T4', 'Count': 1}]}\",0.526,0.2201,us-east-1,use1-az2,x86_64",
        "g4dn.xlarge,T4,1.0,4.0,16.0,\"{'Gpus': [{'Name': 'T4', 'Count': 1}]}\",0.631,0.25,eu-west-1,euw1-az1,x86_64",
        f"p4d.24xlarge,A100,8.0,96.0,1152.0,{GPU_INFO_A100},21.957642,2.465500,us-east-1,use1-az1,x86_64",
        f"p4de.24xlarge,A100-80GB,8.0,96.0,1152.0,{GPU_INFO_A100},27.44705,9.973400,us-east-1,use1-az4,x86_64",
        "p5.48xlarge,H100,8.0,192.0,2048.0,\"{'Gpus': [{'Name': 'H100', 'Count': 8}]}\",55.04,55.040000,"
        "us-east-1,use1-az1,x86_64",
        "p5.4xlarge,H100,1.0,16.0,256.0,\"{'Gpus': [{'Name': 'H100', 'Count': 1}]}\",6.88,,us-east-1,use1-az1,x86_64",
        "m7a.large,,,2.0,8.0,,0.11592,0.056100,us-east-1,use1-az1,x86_64",
        "m7i.large,,,2.0,8.0,,0.1008,0.0396,us-east-1,use1-az1,x86_64",
        "a1.large,,,2.0,4.0,,0.051,0.051000,us-east-1,use1-az2,arm64",
        "inf2.xlarge,Inferentia2,1.0,4.0,16.0,,0.7582,0.3,us-east-1,use1-az1,x86_64",
    ]
)
GCP = "\n".join(
    [
        "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice",
        "a2-ultragpu-1g,12.0,170.0,,,,us-central1,us-central1-a,1.09962,0.54978",
        "a2-highgpu-8g,96.0,680.0,,,,us-central1,us-central1-a,5.91582,2.958",
        "g2-standard-4,4.0,16.0,,,,us-central1,us-central1-a,0.2,0.08",
        "n1-standard-4,4.0,15.0,,,,us-central1,us-central1-a,0.189999,0.04",
        "c3-standard-4,4.0,16.0,,,,us-central1,us-central1-a,0.20161,0.0737",
        "c3d-standard-4,4.0,16.0,,,,us-central1,us-central1-a,0.181,0.06",
        ",,,A100-80GB,1,A100-80GB,us-central1,us-central1-a,3.92,1.57",
        ",,,A100,8,A100,us-central1,us-central1-a,23.47,9.38",
        ",,,L4,1,L4,us-central1,us-central1-a,0.5,0.2",
        ",,,T4,1,T4,us-central1,us-central1-a,0.35,0.14",
        ",,,T4,2,T4,us-central1,us-central1-a,0.7,0.28",
        ",,,V100,1,V100,us-central1,us-central1-a,700.0,700.0",
        ",,,tpu-v6e-4,1,tpu-v6e-4,us-central1,us-central1-a,10.8,2.17683",
    ]
)
AZURE = "\n".join(
    [
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,Generation",
        "Standard_NC4as_T4_v3,T4,1,4,28,T4,0.526,0.0526,eastus,V1",
        "Standard_NC24ads_A100_v4,A100-80GB,1,24,220,A100-80GB,3.673,1.47,eastus,V2",
        "Standard_D2as_v5,,,2,8,,0.086,0.0172,eastus,V2",
    ]
)


def write_catalogs(root, version="v8", **clouds):
    for cloud, text in clouds.items():
        folder = root / version / cloud
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "vms.csv").write_text(text + "\n")
    return root


@pytest.fixture()
def sky(tmp_path):
    root = write_catalogs(tmp_path / "catalogs", aws=AWS, gcp=GCP, azure=AZURE)
    write_catalogs(root, version="v5", aws=AWS.replace("0.526", "9.99"))  # an older version is ignored
    return root


def by_name(instances):
    return {(i.provider, i.instance): i for i in instances}


def test_instances_map_accelerators_to_ampgan_hardware_and_count_gpus(sky):
    source = find_catalogs(str(sky))
    assert source.version == "v8" and len(source.files) == 3
    found = by_name(load_skypilot(source))
    assert (found["aws", "g4dn.xlarge"].hardware, found["aws", "g4dn.xlarge"].price_per_hour) == ("T4", 0.526)
    assert (found["aws", "p4d.24xlarge"].hardware, found["aws", "p4d.24xlarge"].gpu_count) == ("A100-40GB", 8)
    assert found["aws", "p4de.24xlarge"].hardware == "A100-80GB" and found["aws", "p5.48xlarge"].price_per_hour == 55.04
    assert (found["aws", "m7a.large"].hardware, found["aws", "m7i.large"].hardware) == ("EPYC", "Xeon")
    assert ("aws", "a1.large") not in found and ("aws", "inf2.xlarge") not in found  # no ampgan hardware name
    assert found["azure", "Standard_NC24ads_A100_v4"].hardware == "A100-80GB"
    assert found["azure", "Standard_D2as_v5"].hardware == "EPYC"
    assert all(i.verified and "SkyPilot catalog v8" in i.checked for i in found.values())
    assert found["aws", "p4d.24xlarge"].matches_hardware("NVIDIA A100-SXM4-40GB")


def test_gcp_gpu_machines_cost_host_plus_gpus(sky):
    found = by_name(load_skypilot(find_catalogs(str(sky))))
    ultra = found["gcp", "a2-ultragpu-1g"]
    assert (ultra.hardware, ultra.gpu_count) == ("A100-80GB", 1)
    assert ultra.price_per_hour == pytest.approx(1.09962 + 3.92)
    assert found["gcp", "a2-highgpu-8g"].price_per_hour == pytest.approx(5.91582 + 23.47)
    assert found["gcp", "g2-standard-4"].price_per_hour == pytest.approx(0.7)
    t4 = found["gcp", "n1-standard-4+t4"]
    assert t4.price_per_hour == pytest.approx(0.189999 + 0.35) and "n1-standard-4 host" in t4.note
    assert ("gcp", "n1-standard-4+v100") not in found  # 700.0 is GCP's placeholder for "not offered"
    assert found["gcp", "c3-standard-4"].hardware == "Xeon" and found["gcp", "c3d-standard-4"].hardware == "EPYC"


def test_spot_prices_and_regions(sky):
    spot = by_name(load_skypilot(find_catalogs(str(sky)), spot=True))
    assert spot["aws", "g4dn.xlarge"].price_per_hour == 0.2104  # the region's first zone
    assert "spot price" in spot["aws", "g4dn.xlarge"].note
    assert ("aws", "p5.4xlarge") not in spot  # no spot price listed: skipped, not zero
    eu = by_name(load_skypilot(find_catalogs(str(sky)), regions={"aws": "eu-west-1"}))
    assert eu["aws", "g4dn.xlarge"].price_per_hour == 0.631 and eu["aws", "g4dn.xlarge"].region == "eu-west-1"


def test_the_study_arithmetic_with_a_skypilot_price(sky, tmp_path, capsys):
    """1M batches at 0.70 s (fp32) vs 0.41 s (mixed) on a T4 instance, at the catalog's price."""
    results = tmp_path / "results.json"
    results.write_text(json.dumps(bench_results()))
    code, out, err = run_cli(
        capsys,
        "cost",
        str(results),
        "--instance",
        "g4dn.xlarge",
        "--prices-from",
        f"skypilot:{sky}",
        "--out",
        str(tmp_path / "c"),
    )
    assert code == 0, err
    document = json.loads((tmp_path / "c" / "cost.json").read_text())
    rows = {(r["batch_size"], r["precision"]): r for r in document["rows"]}
    assert rows[2048, "fp32"]["cost"] == pytest.approx(0.70 * 1e6 / 3600 * 0.526)  # 102.28
    assert rows[2048, "fp16"]["cost"] == pytest.approx(0.41 * 1e6 / 3600 * 0.526)  # 59.91
    assert document["basis"]["verified"] and "SkyPilot catalog v8" in document["catalog_source"]
    assert "unverified" not in out and "catalog: SkyPilot catalog v8" in out and "on-demand" in out
    code, out, _ = run_cli(
        capsys,
        "cost",
        str(results),
        "--instance",
        "azure/NC4as_T4_v3",
        "--prices-from",
        f"skypilot:{sky}",
        "--spot",
        "--out",
        str(tmp_path / "s"),
    )
    assert code == 0 and "spot prices" in out


def test_bad_catalogs_are_one_line_errors_naming_the_file_and_row(tmp_path, capsys):
    results = tmp_path / "results.json"
    results.write_text(json.dumps(bench_results()))
    cases = {
        "no-columns": (AWS.replace("SpotPrice", "Spot"), "lacks the columns SpotPrice"),
        "bad-price": (AWS.replace("21.957642", "lots"), "vms.csv line 5: Price 'lots' is not a number"),
        "negative": (AWS.replace("55.04,55.040000", "-1,1"), "line 7: Price must be a positive"),
    }
    for name, (text, message) in cases.items():
        root = write_catalogs(tmp_path / name, aws=text)
        code, _, err = run_cli(
            capsys, "cost", str(results), "--instance", "g4dn.xlarge", "--prices-from", f"skypilot:{root}"
        )
        assert code == 2 and message in err and err.count("\n") == 1, (name, err)
    binary = tmp_path / "binary" / "v8" / "aws"
    binary.mkdir(parents=True)
    (binary / "vms.csv").write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run_cli(
        capsys, "cost", str(results), "--instance", "x", "--prices-from", f"skypilot:{tmp_path / 'binary'}"
    )
    assert code == 2 and "not a text CSV" in err
    for spec, message in (
        (f"skypilot:{tmp_path / 'none'}", "no SkyPilot catalogs at"),
        (f"skypilot:{tmp_path}", "has no <version>/<cloud>/vms.csv"),
        ("aws", "the one catalog kind read is skypilot"),
    ):
        code, _, err = run_cli(capsys, "cost", str(results), "--instance", "g4dn.xlarge", "--prices-from", spec)
        assert code == 2 and message in err, err
    code, _, err = run_cli(capsys, "cost", str(results), "--instance", "g4dn.xlarge", "--spot")
    assert code == 2 and "--spot and --region apply to --prices-from" in err


def test_the_built_in_catalog_is_corrected_and_says_what_is_unverified():
    catalog = load_catalog()
    p4d, p5 = find_instance(catalog, "p4d.24xlarge"), find_instance(catalog, "p5.48xlarge")
    assert (p4d.price_per_hour, p5.price_per_hour) == (21.957642, 55.04)
    assert p4d.verified and "skypilot-catalog@00148f2a catalogs/v8/aws/vms.csv" in p4d.checked
    assert not find_instance(catalog, "p5e.48xlarge").verified
    assert find_instance(catalog, "c3-standard-4").price_per_hour == 0.20161
    assert not any("confirmed" in item.note and not item.verified for item in catalog)


def test_staleness_by_age():
    today = datetime.date(2026, 11, 30)
    assert staleness_warning("2026-11-30", today) is None and staleness_warning("2026-06-15", today) is None
    warning = staleness_warning("2025-01", today)
    assert "698 days ago" in warning and "--prices-from skypilot" in warning
    assert "cannot be aged" in staleness_warning("sometime", today)
