"""What runs in mitmproxy's process: the addon (`mitmdump -s addon/oatf_addon.py`) and its sub-addons (`mitm_tap`:
hooks to wire decoders; `views`: content views), the client of the monitor process it starts
(`monitor_process`, whose child runs the engine), and mitmproxy's flow formats read for offline replay
(`flow_file`, `recordings`). The engine itself is `oatf_engine/`; nothing here is imported by it."""
