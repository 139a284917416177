from gpuwise.cli.app import main

main()
