"""Live and offline OATF evaluation of agent traffic: wire decoders, the monitor, reports, and the mitmproxy
addon (`mitmdump -s addon/oatf_addon.py`). Decoders and monitor are sans-I/O and never import mitmproxy."""
